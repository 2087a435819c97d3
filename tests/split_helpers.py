"""A small GPT and its loss and gradients, for the tests of accelerate's batch split."""

import numpy as np

from tinytorch.core.losses import cross_entropy
from tinytorch.core.tensor import Tensor
from tinytorch.models.transformer import GPT


def gpt(seed=0):
    np.random.seed(seed)
    return GPT(vocab_size=17, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=10)


def loss_and_grads(model, x, y):
    """(logits, the class of the node that made them, loss, each parameter's gradient)."""
    for p in model.parameters():
        p.grad = None
    logits = model(Tensor(x))
    node = type(logits._ctx)  # the engine lets go of it in the backward
    loss = cross_entropy(logits, y)
    loss.backward()
    return logits, node, loss.item(), [p.grad.copy() for p in model.parameters()]
