"""Finite-difference referees for gradients, shared by every module's tests.

`check_function` tests one Function's local backward rule without the autograd engine.
`check_graph` runs a whole computation through the engine (modules 05 and later). Both work in
float64. The central differences are module 05's `numerical_gradient`, the one implementation in
the tree: it needs nothing but numpy (autograd.py imports only module 01), and module 05's own
tests check it against a known derivative.
"""

from __future__ import annotations

import numpy as np

from tinytorch.core.autograd import numerical_gradient
from tinytorch.core.tensor import precision, sum_to_shape


def check_function(fn_cls, *arrays, kwargs=None, wrt=None, h=1e-6, rtol=1e-5, atol=1e-7, seed=0):
    """Compare `fn_cls().backward` with central differences of `fn_cls().forward`.

    `wrt` lists the input positions to check (default: every float input).
    """
    kwargs = kwargs or {}
    arrays = [
        np.array(a, dtype=np.float64) if np.asarray(a).dtype.kind == "f" else a for a in arrays
    ]
    wrt = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"] if wrt is None else wrt
    fn = fn_cls()
    fn.needs_grad = tuple(i in wrt for i in range(len(arrays)))
    out = fn.forward(*arrays, **kwargs)
    weight = np.random.default_rng(seed).standard_normal(np.shape(out))
    analytic = fn.backward(weight)

    def loss():
        again = fn_cls()
        again.needs_grad = fn.needs_grad
        return float(np.sum(again.forward(*arrays, **kwargs) * weight))

    for i in wrt:
        got = sum_to_shape(np.asarray(analytic[i], dtype=np.float64), arrays[i].shape)
        want = numerical_gradient(loss, arrays[i], h)
        np.testing.assert_allclose(
            got, want, rtol=rtol, atol=atol, err_msg=f"{fn_cls.__name__}: gradient of input {i}"
        )


def check_graph(build, *arrays, h=1e-6, rtol=1e-5, atol=1e-7, seed=0):
    """`build(*tensors) -> Tensor`; checks the engine's gradients of every input in float64."""
    from tinytorch.core.tensor import Tensor

    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    with precision(np.float64):
        tensors = [Tensor(a, requires_grad=True) for a in arrays]
        out = build(*tensors)
        weight = np.random.default_rng(seed).standard_normal(out.shape)
        (out * Tensor(weight)).sum().backward()

        def loss():
            return float(np.sum(build(*[Tensor(a) for a in arrays]).data * weight))

        for i, (t, a) in enumerate(zip(tensors, arrays)):
            assert t.grad is not None, f"input {i} received no gradient"
            assert t.grad.dtype == np.float64
            want = numerical_gradient(loss, a, h)
            np.testing.assert_allclose(
                t.grad, want, rtol=rtol, atol=atol, err_msg=f"gradient of input {i}"
            )
