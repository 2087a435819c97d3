"""Module 15: PyTorch's int8 quantizers and min/max observers."""

import warnings

import numpy as np
import torch
from torch.ao.quantization.observer import MinMaxObserver, PerChannelMinMaxObserver


def _observer(symmetric, channel_axis=None):
    scheme = {
        (True, False): torch.per_tensor_symmetric,
        (False, False): torch.per_tensor_affine,
        (True, True): torch.per_channel_symmetric,
        (False, True): torch.per_channel_affine,
    }[(symmetric, channel_axis is not None)]
    limits = {"quant_min": -127, "quant_max": 127} if symmetric else {}
    if channel_axis is None:
        return MinMaxObserver(dtype=torch.qint8, qscheme=scheme, **limits)
    return PerChannelMinMaxObserver(
        ch_axis=channel_axis, dtype=torch.qint8, qscheme=scheme, **limits
    )


def _qparams(x, symmetric, channel_axis=None):
    observer = _observer(symmetric, channel_axis)
    observer(torch.from_numpy(x))
    return observer.calculate_qparams()


def build(cases):
    with warnings.catch_warnings():  # torch 2.13 marks its quantized tensors deprecated
        warnings.simplefilter("ignore", UserWarning)
        _build(cases)


def _build(cases):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 16)).astype(np.float32) * 3
    for symmetric in (True, False):
        scale, zero = _qparams(x, symmetric)
        q = torch.quantize_per_tensor(
            torch.from_numpy(x), scale.item(), int(zero.item()), torch.qint8
        )
        cases.put(f"per_tensor/{symmetric}", seed=0, x=x, scale=scale, zero=zero)
        cases.put(f"per_tensor/{symmetric}", codes=q.int_repr(), dequantized=q.dequantize())

    rng = np.random.default_rng(0)
    w = (rng.normal(size=(16, 24)) * rng.uniform(0.1, 4, size=24)).astype(np.float32)
    for symmetric in (True, False):
        scale, zero = _qparams(w, symmetric, channel_axis=1)
        q = torch.quantize_per_channel(torch.from_numpy(w), scale, zero, axis=1, dtype=torch.qint8)
        cases.put(
            f"per_channel/{symmetric}", seed=0, w=w, scale=scale, zero=zero, codes=q.int_repr()
        )

    rng = np.random.default_rng(0)
    x = (rng.normal(size=(20, 12)) + 0.7).astype(np.float32)
    for name, symmetric, axis in (("symmetric", True, None), ("affine", False, None),
                                  ("channel", False, 1)):  # fmt: skip
        scale, zero = _qparams(x, symmetric, axis)
        cases.put(f"observer/{name}", seed=0, x=x, scale=scale, zero=zero)

    # test_quantization_model.py: a Linear with per-channel int8 weights, torch's (out, in) layout
    rng = np.random.default_rng(1)
    weight = rng.uniform(-0.22, 0.22, (20, 12)).astype(np.float32)  # (in, out)
    bias = rng.uniform(-0.22, 0.22, 12).astype(np.float32)
    scale, zero = _qparams(weight.T.copy(), True, channel_axis=0)
    q = torch.quantize_per_channel(torch.from_numpy(weight.T.copy()), scale, zero, axis=0,
                                   dtype=torch.qint8)  # fmt: skip
    x = rng.normal(size=(2, 5, 20)).astype(np.float32)
    out = torch.nn.functional.linear(torch.from_numpy(x), q.dequantize(), torch.from_numpy(bias))
    cases.put("linear", seed=1, weight=weight, bias=bias, scale=scale, codes=q.int_repr(), x=x)
    cases.put("linear", out=out)
