"""Which of the student's functions made which arrays while a check's probe runs, so a failed
check can name the function whose result was wrong (tito/sandbox/check_runner.py uses it). The
runner never imports tito: tito copies this file beside it (bwrap.stage_script) and it is loaded
from there. Only names leave the runner's process, and tito keeps only names it knows.
"""

import re
import types
import weakref


class Watch:
    """While a probe runs: which of the student's functions (`functions`, Class.method names the
    check's cells ask for) returned which arrays, so a failure can name the function whose
    result was wrong. Only names leave this process, and tito keeps only names it knows."""

    def __init__(self, namespace: dict, functions: list[str], check_file: str, lines: list[str]):
        wanted = set(functions)
        self.codes, self.made = {}, {}
        self.check_file, self.lines = check_file, lines
        # (code, line) of the check -> the functions whose arrays went into or came out of the
        # calls its latest run of that line made: the evidence for a temporary it compared
        self.flowed: dict[tuple, list[str]] = {}
        self.last = None
        for value in list(namespace.values()):
            for code in _codes(value):
                name = code.co_qualname
                if name in wanted or name.split(".")[0] in wanted:
                    self.codes[code] = name

    def profile(self, frame, event, arg):
        if event == "return" and frame.f_code in self.codes:
            self._record(arg, self.codes[frame.f_code])
        elif event == "return" and frame.f_code.co_name == "__init__":
            self._built(frame)
        back = frame.f_back
        if event in ("call", "return") and back is not None:
            if back.f_code.co_filename == self.check_file:
                try:
                    self._flow(frame, event, arg, (back.f_code, back.f_lineno))
                except Exception:
                    pass

    def _flow(self, frame, event, arg, place) -> None:
        """A call the check's own code makes: which watched functions made its arguments (at the
        call) or its result (at the return)."""
        if event == "call":
            if place != self.last:
                self.flowed[place], self.last = [], place
            code = frame.f_code
            count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4)
            values = [frame.f_locals.get(name) for name in code.co_varnames[:count]]
        else:
            values = [arg]
        for value in values:
            name = self.source_of(value)
            if name:
                self.flowed.setdefault(place, []).append(name)

    def _record(self, value, name: str) -> None:
        try:
            for array in _arrays(value):
                self.made[array.__array_interface__["data"][0]] = (name, weakref.ref(array))
        except Exception:
            pass

    def _built(self, frame) -> None:
        """An object (a Tensor) built from an array a watched function made: its .data, which
        may be a converted copy, was made by that function too."""
        try:
            code, values = frame.f_code, frame.f_locals
            names = code.co_varnames[: code.co_argcount]
            if not names or names[0] not in values:
                return
            own = getattr(values[names[0]], "__dict__", None)
            data = own.get("data") if isinstance(own, dict) else None
            if not _arrays(data) or self.source_of(data):
                return
            made = next(filter(None, (self.source_of(values.get(n)) for n in names[1:])), "")
            if made:
                self._record(data, made)
        except Exception:
            pass

    def source_of(self, value) -> str:
        """The watched function that returned `value` (or the array it is a view of), "" if
        none did. An address is trusted only while the array recorded there is alive: then no other
        memory can start there, and an array that does is a view of it (np.asarray of a
        memoryview, as tinytorch.checks.outputs makes, is a new array over the same memory)."""
        for array in _arrays(value):
            entry = self.made.get(array.__array_interface__["data"][0])
            if entry is not None and entry[1]() is not None:
                return entry[0]
        return ""

    def blame(self, err: BaseException) -> str:
        """The function a failure points at: the student's function it was raised in, else
        the one function whose arrays the calls on the failing line of the check passed or got
        back (a temporary such as `sigmoid(x).data`), else the one that made an array in a
        variable that line names; "" when none of these shows one function."""
        inside, frame, line = "", None, 0
        tb = err.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            inside = self.codes.get(code, inside)
            if code.co_filename == self.check_file:
                frame, line = tb.tb_frame, tb.tb_lineno
            tb = tb.tb_next
        if inside:
            return inside
        flowed = set(self.flowed.get((frame.f_code, line), ())) if frame is not None else set()
        if len(flowed) == 1:
            return flowed.pop()
        if frame is not None and 0 < line <= len(self.lines):
            for word in re.findall(r"[A-Za-z_]\w*", self.lines[line - 1]):
                found = self.source_of(frame.f_locals.get(word))
                if found:
                    return found
        return ""


def _codes(value) -> list:
    """The code objects of a function or of a class's methods (not entered further)."""
    if isinstance(value, types.FunctionType):
        return [value.__code__]
    if not isinstance(value, type):
        return []
    found = []
    for item in list(vars(value).values()):
        item = getattr(item, "__func__", item)  # staticmethod, classmethod
        if isinstance(item, property):
            item = item.fget
        if isinstance(item, types.FunctionType):
            found.append(item.__code__)
    return found


def _arrays(value) -> list:
    """The arrays of a value (an array, a Tensor's .data, a tuple of them), with the arrays
    they are views of."""
    import numpy as np

    items = value if isinstance(value, (tuple, list)) else (value,)
    found = []
    for item in items[:16]:
        if not isinstance(item, np.ndarray):
            own = getattr(item, "__dict__", None)
            item = own.get("data") if isinstance(own, dict) else None
        depth = 0
        while isinstance(item, np.ndarray) and depth < 4:
            found.append(item)
            item, depth = item.base, depth + 1
    return found
