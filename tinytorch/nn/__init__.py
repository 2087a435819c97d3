"""Layers where a PyTorch user looks for them: `from tinytorch.nn import Linear, LayerNorm`.

Each name lives in the module of the course that builds it (the table below); it is imported on
first use, so this package imports at every stage of the course.
"""

from tinytorch import lazy_names

_HOMES = {
    "Module": "tinytorch.core.layers",
    "Linear": "tinytorch.core.layers",
    "Dropout": "tinytorch.core.layers",
    "Sequential": "tinytorch.core.layers",
    "ReLU": "tinytorch.core.activations",
    "Sigmoid": "tinytorch.core.activations",
    "Tanh": "tinytorch.core.activations",
    "GELU": "tinytorch.core.activations",
    "Softmax": "tinytorch.core.activations",
    "MSELoss": "tinytorch.core.losses",
    "CrossEntropyLoss": "tinytorch.core.losses",
    "Conv2d": "tinytorch.core.spatial",
    "MaxPool2d": "tinytorch.core.spatial",
    "AvgPool2d": "tinytorch.core.spatial",
    "BatchNorm2d": "tinytorch.core.spatial",
    "Flatten": "tinytorch.core.spatial",
    "Embedding": "tinytorch.text.embeddings",
    "PositionalEncoding": "tinytorch.text.embeddings",
    "LearnedPositionalEncoding": "tinytorch.text.embeddings",
    "MultiHeadAttention": "tinytorch.core.attention",
    "LayerNorm": "tinytorch.nn.normalization",
    "MLP": "tinytorch.nn.feedforward",
    "TransformerBlock": "tinytorch.models.transformer",
    "DecoderBlock": "tinytorch.models.transformer",
    "TransformerEncoder": "tinytorch.models.transformer",
}
__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_names("tinytorch.nn", _HOMES)
