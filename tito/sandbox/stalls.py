"""What the check runner (tito/sandbox/check_runner.py) keeps of code that ran out of time, so a
later check of the same submission fails at once where it would run that code again, instead of
waiting out the timeout once more. The runner never imports tito: tito copies this file beside it
(bwrap.stage_script) and it is loaded from there. It needs nothing but the standard library.

A place is (cell label, qualified name, first line) of a code object compiled from a cell; the
runner keys it with the cell's text as well, so a cell whose code differs (the reference's, in an
isolated run) is never taken for the one that ran out of time.
"""

import types

MARK = "__tito_stalled__"  # the constant a stub's `raise` is compiled with, then swapped


def cell_of(code) -> str | None:
    """The label of the cell `code` was compiled from ("<cell label>"), or None."""
    name = code.co_filename
    return name[6:-1] if name.startswith("<cell ") and name.endswith(">") else None


def where(frame, solutions) -> tuple[str, str, int] | None:
    """The place that was running when the time ran out: the innermost frame of a solution cell
    (the student's own code), else the outermost frame of any cell (the cell being run)."""
    outer = None
    while frame is not None:
        code = frame.f_code
        label = cell_of(code)
        if label is not None:
            place = (label, code.co_qualname, code.co_firstlineno)
            if label in solutions:
                return place
            outer = place
        frame = frame.f_back
    return outer


def describe(label: str, name: str) -> str:
    """A place as a student reads it: "GELUFunction.forward (cell 'gelu')", or "cell '7'"."""
    return f"cell '{label}'" if name == "<module>" else f"{name} (cell '{label}')"


def stub(code, error):
    """A code object that raises `error` at once, with `code`'s name, place and free variables
    (so a function made from it takes the same closure); None when it cannot be made."""
    names = code.co_freevars
    lines = ["def _outer():", *(f"    {n} = None" for n in names), "    def _stub(*a, **k):"]
    if names:
        lines.append(f"        ({', '.join(names)},)")
    lines += [f"        raise {MARK!r}", "    return _stub"]
    try:
        outer = _inner(compile("\n".join(lines), code.co_filename, "exec"))
        inner = _inner(outer)
        if inner is None or inner.co_freevars != names:
            return None
        consts = tuple(error if isinstance(c, str) and c == MARK else c for c in inner.co_consts)
        return inner.replace(co_consts=consts, co_name=code.co_name,
                             co_qualname=code.co_qualname,
                             co_firstlineno=code.co_firstlineno)  # fmt: skip
    except (SyntaxError, ValueError, TypeError):
        return None


def _inner(code):
    return next((c for c in code.co_consts if isinstance(c, types.CodeType)), None)


def replace(code, stalled: dict, label: str, text: str):
    """The compiled cell `code` (label, source text) with every code object in it that `stalled`
    holds ((label, text, qualified name, first line) -> the error to raise) swapped for a stub."""

    def walk(item):
        error = stalled.get((label, text, item.co_qualname, item.co_firstlineno))
        made = stub(item, error) if error is not None and item is not code else None
        if made is not None:
            return made
        consts = [walk(c) if isinstance(c, types.CodeType) else c for c in item.co_consts]
        if all(a is b for a, b in zip(consts, item.co_consts)):
            return item
        return item.replace(co_consts=tuple(consts))

    return walk(code)
