"""Module 16: torch.nn.utils.prune's L1 masks, torch's SVD and the distillation loss (KL + CE)."""

import numpy as np
import torch
import torch.nn.functional as F
import torch.nn.utils.prune as torch_prune

# the linears of GPT(vocab_size=20, embed_dim=32, num_layers=2, num_heads=4), (in, out), in the
# order tinytorch.compress.pruning.linears lists them
BLOCK = [("attention.q_proj", (32, 32)), ("attention.k_proj", (32, 32)),
         ("attention.v_proj", (32, 32)), ("attention.out_proj", (32, 32)),
         ("mlp.linear1", (32, 128)), ("mlp.linear2", (128, 32))]  # fmt: skip
GPT_LINEARS = [(f"blocks.{i}.{n}", s) for i in range(2) for n, s in BLOCK] + [("lm_head", (32, 20))]
DISTILLATION = [(1.0, 0.5), (2.0, 0.9), (4.0, 0.0), (0.5, 1.0)]  # temperature, alpha


def _twin(weight):
    """A torch.nn.Linear holding `weight` (in, out) in torch's (out, in) layout."""
    layer = torch.nn.Linear(*weight.shape)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(weight.T.copy()))
    return layer


def _pruning(cases):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(9, 14)).astype(np.float32)
    layer = _twin(w)
    torch_prune.l1_unstructured(layer, "weight", amount=0.6)
    cases.put("l1_layer", seed=0, w=w, mask=layer.weight_mask.T.bool())

    rng = np.random.default_rng(1)
    weights = {}  # each layer its own scale, so a global threshold differs from per-layer ones
    for name, shape in GPT_LINEARS:
        weights[name] = (rng.normal(size=shape) * rng.uniform(0.01, 0.05)).astype(np.float32)
    twins = [_twin(w) for w in weights.values()]
    torch_prune.global_unstructured(
        [(t, "weight") for t in twins], pruning_method=torch_prune.L1Unstructured, amount=0.7
    )
    for (name, w), twin in zip(weights.items(), twins):
        cases.put(f"global/{name}", weight=w, mask=twin.weight_mask.T.bool())


def _distillation(cases):
    rng = np.random.default_rng(0)
    w = rng.uniform(-0.18, 0.18, (30, 20)).astype(np.float32)
    cases.put(
        "svd", seed=0, w=w, singular_values=torch.linalg.svdvals(torch.from_numpy(w).double())
    )

    for i, (temperature, alpha) in enumerate(DISTILLATION):
        rng = np.random.default_rng(i)
        s, t = rng.normal(size=(2, 5, 7)), rng.normal(size=(2, 5, 7)) * 3
        y = rng.integers(0, 7, size=(2, 5))
        v = s.shape[-1]
        s_t = torch.tensor(s.reshape(-1, v), requires_grad=True)
        t_t = torch.tensor(t.reshape(-1, v))
        soft = F.kl_div(
            F.log_softmax(s_t / temperature, -1),
            F.log_softmax(t_t / temperature, -1),
            reduction="batchmean",
            log_target=True,
        )
        hard = F.cross_entropy(s_t, torch.tensor(y.reshape(-1)))
        loss = alpha * temperature**2 * soft + (1 - alpha) * hard
        loss.backward()
        grad = s_t.grad.reshape(s.shape)
        cases.put(f"distillation/{i}", seed=i, student=s, teacher=t, targets=y, loss=loss)
        cases.put(f"distillation/{i}", grad=grad, temperature=temperature, alpha=alpha)


def build(cases):
    _pruning(cases)
    _distillation(cases)
