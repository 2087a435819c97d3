"""A Llama on disk and from PyTorch's names: save_model / load_model round-trip it (as a GPT),
and a state dict whose output projection is its own refuses to load into a tied Llama."""

import numpy as np
import pytest

from tinytorch.core.autograd import no_grad
from tinytorch.models.llama import Llama
from tinytorch.models.llama_weights import to_hf_state_dict
from tinytorch.models.transformer import GPT
from tinytorch.models.weights import load_model, save_model


def sharp_llama(seed: int, **changes) -> Llama:
    np.random.seed(seed)
    sizes = dict(vocab_size=20, embed_dim=16, num_layers=2, num_heads=4, num_kv_heads=2,
                 max_seq_len=8, multiple_of=8, rope_theta=500.0, norm_eps=1e-6)  # fmt: skip
    model = Llama(**{**sizes, **changes})
    for p in model.parameters():  # off the init, so a lost or swapped weight shows
        p.data *= 5 if p.ndim == 2 else np.random.uniform(0.5, 1.5, p.shape)
    return model


@pytest.mark.parametrize("changes", [{}, {"tie_weights": True, "num_kv_heads": 1},
                                     {"hidden_dim": 24}])  # fmt: skip
def test_save_model_round_trips_a_llama(tmp_path, rng, changes):
    model = sharp_llama(1, **changes)
    save_model(model, tmp_path / "llama")  # .npz added, as for a GPT
    back = load_model(tmp_path / "llama.npz")
    assert type(back) is Llama and back.config == model.config
    tokens = rng.integers(0, 20, (2, 8))
    with no_grad():
        np.testing.assert_array_equal(back(tokens).data, model(tokens).data)
    gpt = GPT(20, 16, 1, 4, max_seq_len=8)  # and a GPT is still a GPT
    save_model(gpt, tmp_path / "gpt.npz")
    assert type(load_model(tmp_path / "gpt.npz")) is GPT


def test_an_untied_state_dict_does_not_load_into_a_tied_llama(rng):
    untied, tied = sharp_llama(2), sharp_llama(3, tie_weights=True)
    with pytest.raises(ValueError, match="differs from its token embedding.*tie_weights=False"):
        tied.load_state_dict(to_hf_state_dict(untied))
    # PyTorch lists a tied model's shared matrix twice, as lm_head too: that loads
    state = to_hf_state_dict(sharp_llama(4, tie_weights=True))
    state["lm_head.weight"] = state["model.embed_tokens.weight"]
    tied.load_state_dict(state)
    np.testing.assert_array_equal(tied.token_embedding.weight.data,
                                  state["model.embed_tokens.weight"])  # fmt: skip
