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
import zipfile

import numpy as np

RECORD = "record"  # the key of the JSON record among the arrays
NUMERIC = "biuf"  # dtype kinds a number may have: bool, signed, unsigned, float


class WireError(ValueError):
    """The bytes are not a well-formed, bounded, numbers-only .npz."""


def pack(arrays: dict, record: dict) -> bytes:
    """An uncompressed .npz of `arrays` (names -> numeric ndarrays) and the JSON `record`."""
    body = json.dumps(record).encode()
    buffer = io.BytesIO()
    np.savez(buffer, **arrays, **{RECORD: np.frombuffer(body, dtype=np.uint8)})
    return buffer.getvalue()


def unpack(data: bytes, max_bytes: int, lock=None) -> tuple[dict[str, np.ndarray], dict]:
    """(arrays, record) from `pack`'s bytes, or a WireError naming what is wrong. numpy reads
    each .npy header with ast.literal_eval, which is not thread-safe in CPython 3.11: callers in
    threads pass the lock their other ast.parse calls hold (tito.curriculum.notebooks.AST_LOCK)."""
    with lock or contextlib.nullcontext():
        return _unpack(data, max_bytes)


def _unpack(data: bytes, max_bytes: int) -> tuple[dict[str, np.ndarray], dict]:
    if len(data) > max_bytes:
        raise WireError(f"{len(data)} bytes of numbers, more than the {max_bytes} allowed")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            if sum(m.file_size for m in members) > max_bytes:
                raise WireError("the numbers unpack to more than allowed")
            if any(m.compress_type != zipfile.ZIP_STORED for m in members):
                raise WireError("the numbers are compressed (only stored .npy files are read)")
            arrays = {}
            for member in members:
                if not member.filename.endswith(".npy") or member.filename.count("/"):
                    raise WireError(f"unexpected member {member.filename[:60]!r}")
                with archive.open(member) as stream:
                    array = np.lib.format.read_array(stream, allow_pickle=False)
                if array.dtype.kind not in NUMERIC or array.dtype.fields is not None:
                    raise WireError(f"'{member.filename[:-4]}' is not numeric ({array.dtype})")
                arrays[member.filename[:-4]] = array
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, KeyError) as err:
        if isinstance(err, WireError):
            raise
        raise WireError(f"not a readable .npz ({type(err).__name__})") from None
    body = arrays.pop(RECORD, None)
    if body is None or body.dtype != np.uint8 or body.ndim != 1:
        raise WireError("the record is missing")
    try:
        record = json.loads(body.tobytes().decode())
    except (UnicodeDecodeError, ValueError):
        raise WireError("the record is not JSON") from None
    if not isinstance(record, dict):
        raise WireError("the record is not a JSON object")
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
