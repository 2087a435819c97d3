"""Raw numbers between a sandboxed run and tito: one .npz (no pickle) plus a JSON record.

Both sides use this file. tito imports it; the runners that write (tito/sandbox/check_runner.py,
tito/sandbox/trace_runner.py) are scripts run in a sandbox, so they load it from the file copied
next to
them and never import tito. It needs numpy only.

Writing: `pack(arrays, record)` is an uncompressed .npz of the numeric arrays and one more,
RECORD, the UTF-8 bytes of a JSON record as uint8. A run that can write no file sends it as one
stdout line, `line(nonce, word, data)`: "<nonce> <word> <base64>".

Reading (`unpack`) trusts nothing in the bytes: a stored (uncompressed) zip of at most
`max_bytes`, every member a .npy read with allow_pickle=False, numeric dtypes only (bool, int,
float), the record plain JSON. Anything else is a WireError.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import json
import math
import zipfile

import numpy as np

RECORD = "record"  # the key of the JSON record among the arrays
NUMERIC = "biuf"  # dtype kinds a number may have: bool, signed, unsigned, float
HEADER_BYTES = 4096  # a .npy header of one numeric array is under 200 bytes


class WireError(ValueError):
    """The bytes are not a well-formed, bounded, numbers-only .npz."""


def pack(arrays: dict, record: dict) -> bytes:
    """An uncompressed .npz of `arrays` (names -> numeric ndarrays) and the JSON `record`."""
    body = json.dumps(record).encode()
    buffer = io.BytesIO()
    np.savez(buffer, **arrays, **{RECORD: np.frombuffer(body, dtype=np.uint8)})
    return buffer.getvalue()


def unpack(data: bytes, max_bytes: int, lock=None, *, max_arrays: int, max_depth: int,
           max_ndim: int = 32) -> tuple[dict[str, np.ndarray], dict]:  # fmt: skip
    """(arrays, record) from `pack`'s bytes, or a WireError naming what is wrong. Everything is
    bounded before it is parsed or allocated: at most `max_bytes` in all, `max_arrays` members,
    each .npy header read by itself and its declared shape matched against the bytes that are
    actually there (a huge shape allocates nothing), `max_ndim` axes, and the record's JSON
    nested at most `max_depth` deep (tito/sandbox/limits.py holds the values). numpy reads each
    .npy header with ast.literal_eval, which is not thread-safe in CPython 3.11: callers in
    threads pass the lock their other ast.parse calls hold (tito.curriculum.notebooks.AST_LOCK)."""
    with lock or contextlib.nullcontext():
        return _unpack(data, max_bytes, max_arrays, max_depth, max_ndim)


def _read_member(stream, size: int, name: str, max_ndim: int) -> np.ndarray:
    """One .npy member of `size` bytes: its header first, then exactly the bytes it declares."""
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream, HEADER_BYTES)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream, HEADER_BYTES)
    else:
        raise WireError(f"'{name}' has .npy version {version}")
    if dtype.kind not in NUMERIC or dtype.fields is not None or dtype.subdtype is not None:
        raise WireError(f"'{name}' is not numeric ({dtype})")
    if len(shape) > max_ndim or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise WireError(f"'{name}' has a shape of {len(shape)} axes (at most {max_ndim})")
    count = math.prod(shape)
    if count * dtype.itemsize != size - stream.tell():
        raise WireError(f"'{name}' declares shape {str(shape)[:60]}, which its bytes do not hold")
    body = bytearray(stream.read(size - stream.tell()))
    array = np.frombuffer(body, dtype=dtype, count=count)
    return array.reshape(shape, order="F" if fortran else "C")


def json_depth(value, limit: int) -> int:
    """How deep `value` (parsed JSON) nests, counted up to limit + 1 and no further."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            todo.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict)
                                                         else item))  # fmt: skip
    return deepest


def _unpack(data: bytes, max_bytes: int, max_arrays: int, max_depth: int,
            max_ndim: int) -> tuple[dict[str, np.ndarray], dict]:  # fmt: skip
    if len(data) > max_bytes:
        raise WireError(f"{len(data)} bytes of numbers, more than the {max_bytes} allowed")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            if len(members) > max_arrays + 1:  # and the record
                raise WireError(f"{len(members)} arrays, more than the {max_arrays} allowed")
            if sum(m.file_size for m in members) > max_bytes:
                raise WireError("the numbers unpack to more than allowed")
            if any(m.compress_type != zipfile.ZIP_STORED for m in members):
                raise WireError("the numbers are compressed (only stored .npy files are read)")
            arrays = {}
            for member in members:
                if not member.filename.endswith(".npy") or member.filename.count("/"):
                    raise WireError(f"unexpected member {member.filename[:60]!r}")
                name = member.filename[:-4]
                with archive.open(member) as stream:
                    arrays[name] = _read_member(stream, member.file_size, name[:60], max_ndim)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, KeyError, TypeError,
            OverflowError, SyntaxError, MemoryError, RecursionError) as err:  # fmt: skip
        if isinstance(err, WireError):
            raise
        raise WireError(f"not a readable .npz ({type(err).__name__})") from None
    body = arrays.pop(RECORD, None)
    if body is None or body.dtype != np.uint8 or body.ndim != 1:
        raise WireError("the record is missing")
    try:
        record = json.loads(body.tobytes().decode())
    except RecursionError:
        raise WireError(f"the record nests deeper than {max_depth} levels") from None
    except (UnicodeDecodeError, ValueError):
        raise WireError("the record is not JSON") from None
    if not isinstance(record, dict):
        raise WireError("the record is not a JSON object")
    if json_depth(record, max_depth) > max_depth:
        raise WireError(f"the record nests deeper than {max_depth} levels")
    return arrays, record


def line(nonce: str, word: str, data: bytes) -> str:
    """One stdout line carrying `data`."""
    return f"\n{nonce} {word} {base64.b64encode(data).decode()}\n"


def from_lines(output: str, nonce: str, word: str) -> list[bytes]:
    """The data of every `line(nonce, word, ...)` in `output` (undecodable ones are b"")."""
    found = []
    for text in output.splitlines():
        if text.startswith(f"{nonce} {word} "):
            try:
                found.append(base64.b64decode(text.split(" ", 2)[2], validate=True))
            except (binascii.Error, ValueError):
                found.append(b"")
    return found
