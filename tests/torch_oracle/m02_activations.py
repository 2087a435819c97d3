"""Module 02: the activations' values and input gradients, by PyTorch."""

import numpy as np
import torch
import torch.nn.functional as F

FUNCTIONS = {
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "gelu": lambda t: F.gelu(t, approximate="tanh"),
    "softmax": lambda t: torch.softmax(t, dim=-1),
}
AXES = {"softmax-1": -1, "softmax0": 0, "softmax1": 1}  # softmax along a stated axis
SHAPES = [(7,), (4, 9), (2, 3, 5)]


def label(shape) -> str:
    return "x".join(map(str, shape))


def build(cases):
    # test_activations_torch.py: forward and backward, several shapes
    refs = {k: v for k, v in FUNCTIONS.items() if k != "softmax"}
    refs |= {k: (lambda axis: lambda t: torch.softmax(t, dim=axis))(a) for k, a in AXES.items()}
    for name, ref in refs.items():
        for shape in SHAPES:
            if AXES.get(name, 0) >= len(shape):
                shape = (*shape, 3)
            seed = sum(shape)
            rng = np.random.default_rng(seed)
            x = (3 * rng.standard_normal(shape)).astype(np.float32)
            g = rng.standard_normal(shape).astype(np.float32)
            tx = torch.tensor(x, requires_grad=True)
            out = ref(tx)
            out.backward(torch.tensor(g))
            cases.put(f"{name}/{label(shape)}", seed=seed, x=x, g=g, out=out, grad=tx.grad)

    x = np.random.default_rng(1).standard_normal((3, 6)).astype(np.float32)
    for name, ref in FUNCTIONS.items():
        cases.put(f"{name}/layer", seed=1, x=x, out=ref(torch.tensor(x)))

    x = np.linspace(-4, 4, 101).astype(np.float32)
    tanh_form = F.gelu(torch.tensor(x), approximate="tanh")
    cases.put("gelu_forms", x=x, tanh_form=tanh_form, exact=F.gelu(torch.tensor(x)))

    x = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    for axis in (0, 1, -1, -2):
        cases.put(f"softmax_axis{axis}", seed=2, x=x, out=torch.softmax(torch.tensor(x), dim=axis))

    # test_activations_stability.py: extreme inputs
    x = np.array([-1e4, -500.0, -80.0, 0.0, 80.0, 500.0, 1e4], dtype=np.float32)
    cases.put("sigmoid_large", x=x, out=torch.sigmoid(torch.tensor(x)))
    x = np.array([[1e4, 1e4 - 1, -1e4], [-1e4, -1e4, -1e4]], dtype=np.float32)
    cases.put("softmax_large", x=x, out=torch.softmax(torch.tensor(x), dim=-1))
