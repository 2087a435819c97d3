"""A Llama's weights under PyTorch's names, and a Hugging Face `LlamaForCausalLM` folder.

Three spellings of the same weights: ours (module 21: `blocks.0.attention.q_proj.weight`, Linear
weights `(in, out)`), Meta's reference code (`layers.0.attention.wq.weight`, `(out, in)`) and
Hugging Face's (`model.layers.0.self_attn.q_proj.weight`, `(out, in)`). Meta and we rotate the
interleaved pairs (2k, 2k + 1) of each head; Hugging Face rotates dimension k with k + D/2, so
its q and k rows are ours permuted within each head (`to_halves`, `from_halves`), which makes
the scores, and every logit, the same.

`ours_from_torch(state, config)` turns either PyTorch spelling into ours (`Llama.load_state_dict`
calls it); `save_llama(model, folder, tokenizer)` writes what `LlamaForCausalLM.from_pretrained`
and `AutoTokenizer.from_pretrained` read; `load_llama(folder)` reads it back, and refuses in one
line a config.json our Llama would compute differently (`check_llama_config`: rope scaling, an
activation other than SiLU, biases, another head_dim).

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson: numpy only at the top; the model class
(module 21), safetensors (the `hf` extra) and module 07's writer are imported where needed.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import numpy as np

META = {  # Meta's reference names -> ours
    "tok_embeddings": "token_embedding",
    "layers": "blocks",
    "attention.wq": "attention.q_proj",
    "attention.wk": "attention.k_proj",
    "attention.wv": "attention.v_proj",
    "attention.wo": "attention.out_proj",
    "output": "lm_head",
}
HF = {  # Hugging Face's names -> ours
    "model.embed_tokens": "token_embedding",
    "model.layers": "blocks",
    "model.norm": "norm",
    "input_layernorm": "attention_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.o_proj": "attention.out_proj",
    "self_attn": "attention",
    "mlp.gate_proj": "feed_forward.w1",
    "mlp.up_proj": "feed_forward.w3",
    "mlp.down_proj": "feed_forward.w2",
}
LINEAR = re.compile(r"(_proj|\.w[123])\.weight$|^lm_head\.weight$")  # stored (out, in) by torch


def _rename(name: str, table: dict[str, str]) -> str:
    for theirs, ours in table.items():  # whole dotted parts only, longest first in each table
        name = re.sub(rf"(^|\.){re.escape(theirs)}(?=\.|$)", rf"\g<1>{ours}", name)
    return name


def to_halves(w: np.ndarray, heads: int) -> np.ndarray:
    """Rows (heads * D, in) of interleaved pairs -> Hugging Face's halves, head by head."""
    rows, cols = w.shape
    return w.reshape(heads, rows // heads // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def from_halves(w: np.ndarray, heads: int) -> np.ndarray:
    """The inverse of `to_halves`."""
    rows, cols = w.shape
    return w.reshape(heads, 2, rows // heads // 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def spelling(state: dict) -> str:
    """ "hf", "meta" or "ours", from the names of a state dict."""
    if any(k.startswith("model.") for k in state):
        return "hf"
    if any(k.startswith(("tok_embeddings.", "layers.")) for k in state):
        return "meta"
    return "ours"


def ours_from_torch(state: dict, config) -> dict[str, np.ndarray]:
    """A Meta or Hugging Face Llama state dict (arrays or torch tensors) in our names and layout."""
    kind = spelling(state)
    table = HF if kind == "hf" else META
    out = {}
    for name, value in state.items():
        if name.endswith("rotary_emb.inv_freq"):  # older checkpoints keep the angles; ours too
            continue
        value = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
        key = _rename(name, table)
        if kind == "hf" and key.endswith(("attention.q_proj.weight", "attention.k_proj.weight")):
            heads = config.num_heads if ".q_proj" in key else config.num_kv_heads
            value = from_halves(value, heads)
        out[key] = value.T if LINEAR.search(key) else value
    if config.tie_weights and "lm_head.weight" in out:  # the embedding, listed twice by PyTorch
        head, embedding = out.pop("lm_head.weight"), out.get("token_embedding.weight")
        if embedding is not None and not np.array_equal(head.T, embedding):
            raise ValueError(
                "the state dict's output projection differs from its token embedding (an untied "
                "model); build the Llama with tie_weights=False to load it"
            )
    return out


def hf_config(model) -> dict:
    """config.json of `model` as a LlamaForCausalLM."""
    c = model.config
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": c.vocab_size,
        "hidden_size": c.embed_dim,
        "intermediate_size": model.blocks[0].feed_forward.w1.weight.shape[1],
        "num_hidden_layers": c.num_layers,
        "num_attention_heads": c.num_heads,
        "num_key_value_heads": c.num_kv_heads,
        "head_dim": c.embed_dim // c.num_heads,
        "max_position_embeddings": c.max_seq_len,
        "rms_norm_eps": c.norm_eps,
        "rope_theta": c.rope_theta,  # transformers 4
        "rope_parameters": {"rope_type": "default", "rope_theta": c.rope_theta},  # and 5
        "hidden_act": "silu",
        "tie_word_embeddings": c.tie_weights,
        "attention_bias": False,
        "mlp_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        "pretraining_tp": 1,
        "initializer_range": 0.02,
        "use_cache": True,
        "dtype": "float32",
    }


def to_hf_state_dict(model) -> dict[str, np.ndarray]:
    """Every weight under LlamaForCausalLM's name and layout, float32 (tied: no lm_head)."""
    c, back = model.config, {ours: theirs for theirs, ours in HF.items()}
    out = {}
    for name, p in model.named_parameters():
        key = name
        for ours, theirs in sorted(back.items(), key=lambda kv: -len(kv[0])):
            key = re.sub(rf"(^|\.){re.escape(ours)}(?=\.|$)", rf"\g<1>{theirs}", key)
        value = p.data.T if LINEAR.search(name) else p.data
        if name.endswith("attention.q_proj.weight"):
            value = to_halves(value, c.num_heads)
        elif name.endswith("attention.k_proj.weight"):
            value = to_halves(value, c.num_kv_heads)
        out[key] = np.ascontiguousarray(value, dtype=np.float32)
    return out


def save_llama(model, folder, tokenizer=None) -> list[str]:
    """Write `folder` as `save_pretrained` would, plus the tokenizer; returns the file names."""
    from tinytorch.core.checkpoint import write_atomic  # the package's one writer
    from tinytorch.models.huggingface import (
        CONFIG_FILE,
        TOKENIZER_FILE,
        WEIGHTS_FILE,
        _json_text,
        _safetensors,
        tokenizer_json,
    )

    config = hf_config(model)
    files = {
        CONFIG_FILE: _json_text(config),
        WEIGHTS_FILE: _safetensors().save(to_hf_state_dict(model), metadata={"format": "pt"}),
    }
    if tokenizer is not None:
        with tempfile.TemporaryDirectory() as scratch:
            tokenizer.save(Path(scratch) / TOKENIZER_FILE)  # tinytorch's own format
            files[TOKENIZER_FILE] = (Path(scratch) / TOKENIZER_FILE).read_bytes()
        files["tokenizer.json"] = _json_text(tokenizer_json(tokenizer))
        files["tokenizer_config.json"] = _json_text({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "clean_up_tokenization_spaces": False,
            "model_max_length": config["max_position_embeddings"],
        })  # fmt: skip
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        data = content if isinstance(content, bytes) else content.encode("utf-8")
        write_atomic(folder / name, lambda handle, data=data: handle.write(data))
    return list(files)


def _plain_rope(rope) -> bool:
    """No rope scaling: absent, or rope_type (transformers 4: `type`) "default"."""
    if not rope:
        return True
    if not isinstance(rope, dict):
        return False
    kind = rope.get("rope_type", rope.get("type", "default"))
    return kind == "default" and rope.get("partial_rotary_factor", 1.0) == 1.0


def check_llama_config(c: dict) -> None:
    """Raise UnsupportedArchitecture, naming the field and its value, unless module 21's Llama
    computes what a LlamaForCausalLM of config.json `c` does."""
    from tinytorch.models.huggingface import UnsupportedArchitecture

    act, hidden = c.get("hidden_act", "silu"), c.get("hidden_size")
    heads = c.get("num_attention_heads")
    per_head = hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 \
        else None  # fmt: skip
    checks = [  # (field, its value, whether module 21 computes that, what module 21 does)
        ("hidden_act", act, act in ("silu", "swish"), "its SwiGLU gates with SiLU"),
        *[(bias, c.get(bias), not c.get(bias), "it has no biases")
          for bias in ("attention_bias", "mlp_bias")],
        ("rope_scaling", c.get("rope_scaling"), _plain_rope(c.get("rope_scaling")),
         "its rotary positions are unscaled"),
        ("rope_parameters", c.get("rope_parameters"), _plain_rope(c.get("rope_parameters")),
         "its rotary positions are unscaled and turn the whole head"),
        ("partial_rotary_factor", c.get("partial_rotary_factor"),
         c.get("partial_rotary_factor", 1.0) == 1.0, "its rotary positions turn the whole head"),
        ("head_dim", c.get("head_dim"), c.get("head_dim") in (None, per_head),
         f"its heads are hidden_size // num_attention_heads = {per_head} wide"),
    ]  # fmt: skip
    for field, value, computed, ours in checks:
        if not computed:
            raise UnsupportedArchitecture(
                f"tinytorch's Llama cannot express {field}={value!r} ({ours})"
            )


def load_llama(folder):
    """The module-21 Llama of a LlamaForCausalLM folder (config.json, model.safetensors);
    a setting it cannot express is refused in one line (`check_llama_config`)."""
    from tinytorch.models.huggingface import CONFIG_FILE, WEIGHTS_FILE, _safetensors
    from tinytorch.models.llama import Llama

    folder = Path(folder)
    try:
        c = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read {folder / CONFIG_FILE}: {err}") from None
    if c.get("model_type") != "llama":
        raise ValueError(f"{folder} holds a {c.get('model_type')!r} model, not a Llama")
    check_llama_config(c)
    rope = c.get("rope_parameters") or {}
    try:
        model = Llama(c["vocab_size"], c["hidden_size"], c["num_hidden_layers"],
                      c["num_attention_heads"], c.get("num_key_value_heads"),
                      c.get("max_position_embeddings", 2048), c["intermediate_size"],
                      rope_theta=rope.get("rope_theta", c.get("rope_theta", 10000.0)),
                      norm_eps=c.get("rms_norm_eps", 1e-6),
                      tie_weights=c.get("tie_word_embeddings", False))  # fmt: skip
    except KeyError as err:
        raise ValueError(f"{folder / CONFIG_FILE} has no {err.args[0]!r}") from None
    model.load_state_dict(_safetensors().load_file(folder / WEIGHTS_FILE))
    return model


__all__ = ["META", "HF", "to_halves", "from_halves", "spelling", "ours_from_torch", "hf_config",
           "to_hf_state_dict", "save_llama", "check_llama_config", "load_llama"]  # fmt: skip
