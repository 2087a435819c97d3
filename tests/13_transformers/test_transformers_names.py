"""The public names sit where a PyTorch user and the course page look for them."""

import inspect

import tinytorch
import tinytorch.nn as nn
import tinytorch.optim as optim
from tinytorch.core.attention import MultiHeadAttention
from tinytorch.core.layers import Linear
from tinytorch.core.tensor import Tensor
from tinytorch.core.transformer import GPT, TransformerBlock
from tinytorch.nn import LayerNorm


def test_top_level_and_nn_and_optim_names_are_the_course_classes():
    assert tinytorch.Tensor is Tensor
    assert nn.Linear is Linear and nn.MultiHeadAttention is MultiHeadAttention
    assert nn.TransformerBlock is TransformerBlock and nn.LayerNorm is LayerNorm
    for name in ("Embedding", "Dropout", "Sequential", "MLP", "GELU", "Module", "ReLU"):
        assert name in dir(nn) and isinstance(getattr(nn, name), type), name
    assert {"SGD", "Adam", "AdamW"} <= set(dir(optim)) and optim.AdamW.__name__ == "AdamW"
    assert "Tensor" in dir(tinytorch) and tinytorch.no_grad.__name__ == "no_grad"


def test_generate_shows_its_real_signature_through_no_grad():
    params = inspect.signature(GPT.generate).parameters
    assert list(params)[:4] == ["self", "prompt_tokens", "max_new_tokens", "temperature"]
    assert "prompt" in (GPT.generate.__doc__ or "").lower()
