"""Finite-difference referees for gradients, shared by every module's tests.

`check_function` tests one Function's local backward rule without the autograd engine.
`check_graph` runs a whole computation through the engine (modules 05 and later). Both work in
float64. The central differences are the referee's own (`central_differences`), not module 05's
`numerical_gradient`: that is a student's answer, and a referee built on it would charge a slip
there to the gradient checks of every module, and could not check modules 01-04 at all in a
student edition where module 05 is still a stub.
"""

from __future__ import annotations

import inspect

import numpy as np

from tinytorch.core.tensor import precision, sum_to_shape

ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")
SYMBOLS = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "MatMul": "@", "Pow": "**"}


def central_differences(f, x: np.ndarray, h: float) -> np.ndarray:
    """d f() / d x by central differences; each entry of `x` is nudged in place and put back."""
    slopes = np.empty_like(x)
    for index in np.ndindex(x.shape):
        saved = x[index]
        x[index] = saved + h
        above = f()
        x[index] = saved - h
        below = f()
        x[index] = saved
        slopes[index] = (above - below) / (2 * h)
    return slopes


def operand(fn_cls, i: int, count: int) -> str:
    """Input i of a Function in the words a student reads: "the second operand (b in a - b)",
    "the first input (x of forward(x, weight))"."""
    names = [p for p in inspect.signature(fn_cls.forward).parameters if p != "self"][:count]
    ordinal = ORDINALS[i] if i < len(ORDINALS) else f"number {i + 1}"
    name = names[i] if i < len(names) else f"input {i}"
    if fn_cls.__name__ in SYMBOLS and len(names) == 2:
        return f"the {ordinal} operand ({name} in {names[0]} {SYMBOLS[fn_cls.__name__]} {names[1]})"
    return f"the {ordinal} input ({name} of forward({', '.join(names)}))"


def wrong_values(got, want, what: str, rtol: float, atol: float, blame=None,
                 referee: str = "central differences", then: str = "") -> None:  # fmt: skip
    """An AssertionError saying what is wrong and by how much, when `got` is not `want`
    (numpy's assert_allclose decides); `blame` (a function) is where tito's report points, and
    `then` what waits for this to be right."""
    try:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    except AssertionError:
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            how = f"its shape {got.shape} is not {want.shape}, the shape of {referee}"
        else:
            worst = float(np.max(np.abs(got.astype(np.float64) - want)))
            how = f"it differs from {referee} by up to {worst:.3g} (rtol {rtol:g}, atol {atol:g})"
        err = AssertionError(f"{what} is wrong: {how}" + (f"; {then}" if then else ""))
        if blame is not None:  # read by tito's pytest plugin: a place the traceback lacks
            _, line = inspect.getsourcelines(blame)
            err.tito_where = (inspect.getsourcefile(blame), line)
        raise err from None


def wrong_output(got, want, fn_cls, rtol: float, atol: float, referee: str = "the expected values",
                 then: str = "") -> None:  # fmt: skip
    """wrong_values for the output of `fn_cls.forward`, naming and blaming that forward."""
    what = f"{fn_cls.__name__}.forward: its output"
    wrong_values(got, want, what, rtol, atol, fn_cls.forward, referee, then)


def check_function(fn_cls, *arrays, kwargs=None, wrt=None, h=1e-6, rtol=1e-5, atol=1e-7, seed=0,
                   reference=None):  # fmt: skip
    """Compare `fn_cls().backward` with central differences of `fn_cls().forward`.

    `wrt` lists the input positions to check (default: every float input). `reference(*arrays,
    **kwargs)`, when given, is the right output: a forward that differs from it is reported as
    the forward's slip, since central differences of a wrong forward would blame a right backward.
    """
    kwargs = kwargs or {}
    arrays = [
        np.array(a, dtype=np.float64) if np.asarray(a).dtype.kind == "f" else a for a in arrays
    ]
    wrt = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"] if wrt is None else wrt
    fn = fn_cls()
    fn.needs_grad = tuple(i in wrt for i in range(len(arrays)))
    out = fn.forward(*arrays, **kwargs)
    if reference is not None:
        then = f"{fn_cls.__name__}.backward is checked against the forward once it is right"
        wrong_output(out, reference(*arrays, **kwargs), fn_cls, rtol, atol, then=then)
    weight = np.random.default_rng(seed).standard_normal(np.shape(out))
    analytic = fn.backward(weight)

    def loss():
        again = fn_cls()
        again.needs_grad = fn.needs_grad
        return float(np.sum(again.forward(*arrays, **kwargs) * weight))

    for i in wrt:
        got = sum_to_shape(np.asarray(analytic[i], dtype=np.float64), arrays[i].shape)
        want = central_differences(loss, arrays[i], h)
        what = f"{fn_cls.__name__}.backward: the gradient of {operand(fn_cls, i, len(arrays))}"
        wrong_values(got, want, what, rtol, atol, blame=fn_cls.backward)


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
            want = central_differences(loss, a, h)
            ordinal = ORDINALS[i] if i < len(ORDINALS) else f"number {i + 1}"
            wrong_values(t.grad, want, f"the gradient of the {ordinal} input", rtol, atol)


def weighted_grads(fn, *arrays, weight):
    """Output and input gradients of `fn(*tensors)` under the loss sum(out * weight), in float64
    (the answer a fast kernel is compared with, where the lesson's code is the referee)."""
    from tinytorch.core.tensor import Tensor

    with precision(np.float64):
        tensors = [Tensor(a, requires_grad=True) for a in arrays]
        out = fn(*tensors)
        (out * Tensor(weight)).sum().backward()
    return out.data, [t.grad for t in tensors]
