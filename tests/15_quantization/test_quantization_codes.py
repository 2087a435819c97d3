"""Scales, codes and their round trip: exact arithmetic, error bounds, PyTorch's quantizers."""

import numpy as np
import oracle
import pytest

from tinytorch.compress.quantization import (
    RangeObserver,
    dequantize,
    fake_quantize,
    int8_matmul,
    pack_nibbles,
    qrange,
    quant_params,
    quantize,
    unpack_nibbles,
)

# PyTorch's quantize_per_tensor / quantize_per_channel and MinMaxObserver answers, committed
# by tests/torch_oracle/m15_quantization.py
REF = oracle.load(__file__)


def test_code_ranges():
    assert qrange(8, True) == (-127, 127) and qrange(8, False) == (-128, 127)
    assert qrange(4, True) == (-7, 7) and qrange(4, False) == (-8, 7)


@pytest.mark.parametrize("bits", [8, 6, 4, 3])
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_error_is_at_most_half_a_scale_and_the_round_trip_is_exact(rng, bits, symmetric, axis):
    x = rng.normal(size=(7, 9)) * rng.uniform(0.01, 5, size=9) + rng.uniform(-2, 2)
    scale, zero = quant_params(x, bits, symmetric, axis)
    q = quantize(x, scale, zero, bits)
    qmin, qmax = qrange(bits, symmetric)
    assert q.dtype == np.int8 and q.min() >= qmin and q.max() <= qmax
    back = dequantize(q, scale, zero).astype(np.float64)
    assert np.all(np.abs(back - x) <= scale / 2 * (1 + 1e-6) + 1e-7)
    np.testing.assert_array_equal(quantize(back, scale, zero, bits), q)
    # the codes stand for scale * (q - zero) exactly: recompute in float64 by hand
    np.testing.assert_allclose(back, scale * (q.astype(np.float64) - zero), rtol=1e-6, atol=1e-7)


def test_the_range_contains_zero_so_zero_is_coded_exactly(rng):
    x = rng.uniform(3, 5, size=(4, 6))  # all positive: the range is widened down to 0
    for symmetric in (True, False):
        scale, zero = quant_params(x, 8, symmetric, axis=1)
        assert np.all(dequantize(quantize(np.zeros((1, 6)), scale, zero), scale, zero) == 0)


def test_per_channel_beats_per_tensor_when_channels_differ_in_size(rng):
    w = rng.normal(size=(64, 8)) * np.array([100, 1, 1, 1, 0.1, 0.1, 0.01, 1])
    tensor_error = np.abs(fake_quantize(w) - w).mean(axis=0)
    channel_error = np.abs(fake_quantize(w, axis=1) - w).mean(axis=0)
    assert np.all(channel_error[1:] < tensor_error[1:] / 10)  # every small column gains


def test_an_all_zero_channel_gets_scale_one_and_stays_zero():
    w = np.zeros((3, 2))
    w[:, 1] = [1.0, -2.0, 0.5]
    scale, zero = quant_params(w, 8, True, axis=1)
    assert scale[0, 0] == 1 and np.all(fake_quantize(w, axis=1)[:, 0] == 0)


def test_values_outside_the_range_are_clipped():
    q = quantize(np.array([-1000.0, -1.0, 1.0, 1000.0]), 0.1, 0, 8)
    np.testing.assert_array_equal(q, [-128, -10, 10, 127])
    np.testing.assert_array_equal(quantize(np.array([-9.0, 9.0]), 1.0, 0, 4), [-8, 7])


def test_per_tensor_codes_equal_torch_quantize_per_tensor():
    for symmetric in (True, False):
        case = REF.case(f"per_tensor/{symmetric}")  # torch's scale, zero point and codes
        x, scale, zero = case["x"], case["scale"], case["zero"]
        ours_scale, ours_zero = quant_params(x, 8, symmetric)
        np.testing.assert_allclose(ours_scale.item(), scale.item(), rtol=1e-6)
        assert ours_zero.item() == zero.item()
        ours = quantize(x, ours_scale, ours_zero)
        np.testing.assert_array_equal(ours, case["codes"])
        np.testing.assert_allclose(
            dequantize(ours, ours_scale, ours_zero), case["dequantized"], rtol=1e-6
        )


def test_per_channel_codes_equal_torch_quantize_per_channel():
    for symmetric in (True, False):
        case = REF.case(f"per_channel/{symmetric}")
        w = case["w"]
        scale, zero = quant_params(w, 8, symmetric, axis=1)
        np.testing.assert_allclose(scale[0], case["scale"], rtol=1e-6)
        np.testing.assert_array_equal(zero[0], case["zero"])
        np.testing.assert_array_equal(quantize(w, scale, zero), case["codes"])


def test_scales_equal_torch_min_max_observers():
    # MinMaxObserver(qint8, per_tensor_symmetric, -127..127), then per_tensor_affine
    sym = REF.case("observer/symmetric")
    ours = quant_params(sym["x"], 8, symmetric=True)
    np.testing.assert_allclose(ours[0].item(), sym["scale"].item(), rtol=1e-6)
    assert ours[1].item() == sym["zero"].item() == 0
    affine = REF.case("observer/affine")
    ours = quant_params(affine["x"], 8, symmetric=False)
    np.testing.assert_allclose(ours[0].item(), affine["scale"].item(), rtol=1e-6)
    assert ours[1].item() == affine["zero"].item()
    channel = REF.case("observer/channel")  # PerChannelMinMaxObserver(ch_axis=1, affine)
    ours = quant_params(channel["x"], 8, symmetric=False, axis=1)
    np.testing.assert_allclose(ours[0][0], channel["scale"], rtol=1e-6)
    np.testing.assert_array_equal(ours[1][0], channel["zero"])


def test_observer_keeps_the_range_over_batches(rng):
    batches = [rng.normal(size=(3, 5)) * (i + 1) for i in range(4)]
    observer = RangeObserver()
    for b in batches:
        observer.observe(b)
    both = np.concatenate(batches)
    assert (observer.low, observer.high, observer.count) == (both.min(), both.max(), 4)
    assert observer.params(8)[0].item() == quant_params(both, 8, False)[0].item()


def test_int4_codes_pack_two_to_a_byte_and_unpack_exactly(rng):
    for shape in [(5, 3), (4, 4), (1,), (7, 1, 3)]:
        q = rng.integers(-8, 8, size=shape).astype(np.int8)
        packed = pack_nibbles(q)
        assert packed.dtype == np.uint8 and packed.size == (q.size + 1) // 2
        np.testing.assert_array_equal(unpack_nibbles(packed, shape), q)


def test_int8_matmul_is_exact_integer_arithmetic(rng):
    qx = rng.integers(-128, 128, size=(6, 300)).astype(np.int8)
    qw = rng.integers(-128, 128, size=(300, 5)).astype(np.int8)
    exact = qx.astype(np.int64) @ qw.astype(np.int64)  # no overflow in int64
    got = int8_matmul(qx, qw)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, exact)
    sx, sw = 0.02, 0.003  # scales applied after the exact accumulation
    np.testing.assert_allclose(got * (sx * sw), (qx * sx) @ (qw * sw), rtol=1e-10)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: quant_params(np.ones(3), bits=9), "bits must be a whole number from 2 to 8"),
        (lambda: quant_params(np.ones(3), bits=True), "bits must be"),
        (lambda: quant_params(np.ones((2, 3)), axis=2), "axis must name one of the 2 axes"),
        (lambda: quant_params(np.array([1.0, np.nan])), "finite numbers"),
        (lambda: quant_params(np.array([])), "non-empty"),
        (lambda: RangeObserver().params(), "has seen nothing"),
        (lambda: int8_matmul(np.ones((2, 2)), np.ones((2, 2), np.int8)), "int8 codes"),
    ],
)
def test_bad_input_is_one_clear_error(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()
