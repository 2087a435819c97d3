"""The judge's own parts, without a sandbox: the numbers' wire format refuses anything but
bounded numeric arrays, and the comparison passes only what the reference's numbers allow."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from tito.grading.judge import Numbers, compare_value, judge, read_numbers
from tito.sandbox import npzwire


def probe_numbers(arrays: dict, keys=None, error="", tolerance=None) -> Numbers:
    record = {
        "name": "test_probe",
        "keys": list(arrays) if keys is None else keys,
        "error": error,
        "tolerance": tolerance or {"rtol": 1e-5, "atol": 1e-8},
    }
    sent = npzwire.pack({f"p0_{k}": v for k, v in arrays.items()}, {"probes": [record]})
    return read_numbers([sent])


def test_numbers_round_trip_without_pickle():
    arrays = {"y": np.arange(6.0).reshape(2, 3), "n": np.array(3), "b": np.array([True, False])}
    got, record = npzwire.unpack(
        npzwire.pack(arrays, {"a": [1, "x"]}), 1 << 20, max_arrays=9, max_depth=4
    )
    assert record == {"a": [1, "x"]}
    assert set(got) == set(arrays) and all(np.array_equal(got[k], arrays[k]) for k in arrays)


def _zip(members: dict[str, bytes], method=zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _npy(array) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=True)
    return buffer.getvalue()


RECORD = _npy(np.frombuffer(b'{"probes": []}', np.uint8))


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"not a zip at all", "not a readable .npz"),
        (_zip({"record.npy": RECORD, "x.npy": _npy(np.array([object()]))}), "is not numeric"),
        (_zip({"record.npy": RECORD, "x.npy": _npy(np.array(["text"]))}), "is not numeric"),
        (_zip({"record.npy": RECORD, "x.npy": _npy(np.ones(2, "c16"))}), "is not numeric"),
        (_zip({"record.npy": RECORD, "x.npy": _npy(np.zeros(2, "i4,f8"))}), "is not numeric"),
        (_zip({"record.npy": RECORD, "x.npy": _npy(np.zeros(10**6))}), "more than"),
        (
            _zip({"record.npy": RECORD, "x.npy": _npy(np.zeros(10**5))}, zipfile.ZIP_DEFLATED),
            "compressed",
        ),  # fmt: skip
        (_zip({"record.npy": RECORD, "../x.npy": _npy(np.zeros(2))}), "unexpected member"),
        (_zip({"x.npy": _npy(np.zeros(2))}), "record is missing"),
        (_zip({"record.npy": _npy(np.frombuffer(b"[1, 2]", np.uint8))}), "not a JSON object"),
    ],
)
def test_anything_but_bounded_numbers_is_refused(data, why):
    with pytest.raises(npzwire.WireError, match=why):
        npzwire.unpack(data, 1 << 20, max_arrays=9, max_depth=4)


def test_lines_carry_the_bytes_and_only_the_nonce_counts():
    data = npzwire.pack({"y": np.ones(2)}, {"probes": []})
    output = "noise\n" + npzwire.line("abc", "numbers", data) + "xyz numbers AAAA\n"
    assert npzwire.from_lines(output, "abc", "numbers") == [data]


def test_the_same_numbers_pass_and_the_probe_tolerances_are_the_references():
    ref = probe_numbers({"y": np.array([1.0, 2.0, np.inf]), "n": np.array(3)})
    close = probe_numbers({"y": np.array([1.0 + 1e-7, 2.0, np.inf]), "n": np.array(3)},
                          tolerance={"rtol": 1.0, "atol": 1.0})  # fmt: skip
    assert judge(close, ref) == ""
    off = probe_numbers({"y": np.array([1.1, 2.0, np.inf]), "n": np.array(3)},
                        tolerance={"rtol": 1.0, "atol": 1.0})  # fmt: skip
    assert "'y' differs from the reference in 1 of 2" in judge(off, ref)


@pytest.mark.parametrize(
    ("mine", "why"),
    [
        ({"y": np.zeros(3)}, "shape (3,)"),
        ({"y": np.array([[1, 2]])}, "holds integers"),
        ({"y": np.array([[np.nan, 2.0]])}, "NaN or infinite"),
        ({"y": np.array([[1.0, 2.5]])}, "differs from the reference"),
    ],
)
def test_shapes_kinds_finiteness_and_values_must_match(mine, why):
    assert why in compare_value("y", mine["y"], np.array([[1.0, 2.0]]), 1e-5, 1e-8)


def test_missing_extra_failed_or_absent_numbers_score_nothing():
    ref = probe_numbers({"y": np.ones(2), "dx": np.ones(2)})
    assert "no 'dx'" in judge(probe_numbers({"y": np.ones(2)}), ref)
    extra = probe_numbers({"y": np.ones(2), "dx": np.ones(2), "z": np.ones(1)})
    assert "'z', which the check does not return" in judge(extra, ref)
    failed = probe_numbers({}, keys=[], error="AssertionError: wrong")
    assert judge(failed, ref) == "AssertionError: wrong"
    assert judge(read_numbers([]), ref) == "no numbers came back"
    assert "tampering" in judge(read_numbers([b"", b""]), ref)
    assert "unreadable" in judge(read_numbers([b"junk"]), ref)
    broken = Numbers(problem="the reference failed: X")
    assert judge(probe_numbers({"y": np.ones(2), "dx": np.ones(2)}), broken).startswith(
        "the reference gave no numbers"
    )


def test_a_seed_the_references_own_probe_fails_on_is_drawn_again(monkeypatch):
    from tito.grading import scoring

    seeds = iter([11, 12, 13])
    monkeypatch.setattr(scoring, "new_seed", lambda: next(seeds))

    def reference(module, source, stage, timeout, seed, unsafe=False):
        ok = seed == 13  # the reference's probe raises on the first two seeds
        probe = {"name": "test_p", "keys": ["y"], "error": "" if ok else "AssertionError: tail"}
        return scoring.Reference(seed, {"test-p": Numbers([probe], {"p0_y": np.ones(2)})})

    monkeypatch.setattr(scoring, "reference", reference)
    expected = scoring.fair_reference(None, None, None, 1.0)
    assert expected.seed == 13 and expected.failed() == []

    monkeypatch.setattr(scoring, "new_seed", lambda: 11)  # every seed fails: it gives up, says so
    expected = scoring.fair_reference(None, None, None, 1.0)
    assert expected.failed() == ["test-p"]
    mine = Numbers([{"name": "test_p", "keys": ["y"], "error": ""}], {"p0_y": np.ones(2)})
    assert "the reference's probe failed on this seed" in judge(mine, expected.numbers["test-p"])


def test_a_reference_probe_without_a_tolerance_is_named_not_given_a_default():
    arrays = {"y": np.ones(3, dtype=np.float32)}
    mine = probe_numbers(arrays)
    reference = probe_numbers(arrays)
    reference.probes[0]["tolerance"] = {}
    assert "states no tolerance" in judge(mine, reference)
