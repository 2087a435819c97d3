"""A logistic regression trained as in PyTorch: module 04's BCELoss through module 05's engine
and module 06's SGD (module 04's own tests check its gradients without the engine)."""

import numpy as np

import tinytorch.nn as nn
from tinytorch.core.tensor import Tensor


def test_a_logistic_regression_trains_with_bce_as_in_pytorch():
    from tinytorch.optim import SGD

    data = np.random.default_rng(4)  # its own draws: the module's rng depends on test order
    x = data.normal(size=(64, 2)).astype(np.float32)
    y = (x[:, :1] + x[:, 1:] > 0).astype(np.float32)
    np.random.seed(4)  # Linear draws its initial weights from numpy's global generator
    model = nn.Sequential(nn.Linear(2, 1), nn.Sigmoid())
    loss_fn, optimizer = nn.BCELoss(), SGD(model.parameters(), lr=0.5)
    first = None
    for _ in range(60):
        optimizer.zero_grad()
        loss = loss_fn(model(Tensor(x)), Tensor(y))
        loss.backward()
        optimizer.step()
        first = loss.item() if first is None else first
    assert loss.item() < first / 3
