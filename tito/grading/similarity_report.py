"""The similarity report: one HTML page per module, each flagged (or highest) pair side by side
with the shared runs marked. Everything in it that came from a student (names, code) is escaped
and the page is rebuilt inert like a feedback page (tito/inert.py): no script, no handler."""

from __future__ import annotations

import html

from tito.inert import clean_page

SHOWN = 50  # pairs listed in the terminal (the report lists them all)

STYLE = """
body { font-family: sans-serif; margin: 1.5em; }
table.pairs td, table.pairs th { padding: 0.2em 0.8em; text-align: left; }
tr.flagged td { font-weight: bold; }
div.side { display: flex; gap: 1em; }
div.side > div { flex: 1; min-width: 0; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; font-size: 0.85em; }
mark { background: #ffd27f; }
"""


def marked(text: str, slices: list[tuple[int, int]]) -> str:
    """`text` escaped, with each shared run in <mark>."""
    out, at = [], 0
    for start, end in sorted(slices):
        start = max(start, at)
        if end <= start:
            continue
        out.append(html.escape(text[at:start]))
        out.append(f"<mark>{html.escape(text[start:end])}</mark>")
        at = end
    out.append(html.escape(text[at:]))
    return "".join(out)


def page(result) -> str:
    """The report of a similarity.Result: a table of every pair with shared code, then the
    flagged pairs (and at least the ten highest) side by side."""
    setting = result.settings
    flagged = result.flagged()
    esc = html.escape
    rows = []
    for number, pair in enumerate(result.pairs, 1):  # the table: every pair with shared code
        mark = ' class="flagged"' if setting.flags(pair) else ""
        rows.append(
            f"<tr{mark}><td>{number}</td><td>{pair.score:.2f}</td><td>{esc(pair.a)}</td>"
            f"<td>{pair.share_a:.2f}</td><td>{esc(pair.b)}</td><td>{pair.share_b:.2f}</td>"
            + (
                f'<td><a href="#pair-{number}">side by side</a></td>'
                if number <= 10 or mark
                else ""
            )
            + "</tr>"
        )
    sections = []
    for number, pair in enumerate(result.pairs, 1):
        if not setting.flags(pair) and number > 10:
            continue  # (pairs come highest score first; a flagged one may follow)
        left = marked(result.texts[pair.a], pair.slices_a)
        right = marked(result.texts[pair.b], pair.slices_b)
        sections.append(
            f'<h2 id="pair-{number}">{number}. {esc(pair.a)} and {esc(pair.b)}: '
            f"{pair.score:.2f}</h2>\n"
            f'<div class="side"><div><h3>{esc(pair.a)} ({pair.share_a:.2f} of its own code '
            f"shared)</h3><pre>{left}</pre></div>\n"
            f"<div><h3>{esc(pair.b)} ({pair.share_b:.2f})</h3><pre>{right}</pre></div></div>"
        )
    short = ""
    if result.too_short:
        names = ", ".join(esc(n) for n in result.too_short)
        short = f"<p>Too little own code to judge (blank or nearly): {names}.</p>"
    body = (
        f"<h1>Similarity of {esc(result.module)}</h1>\n"
        f"<p>{len(result.texts)} notebooks compared (solution cells only, the release's code "
        f"discounted). Flagged: a pair where one side's own code shares with the other at least "
        f"{esc(setting.describe())} ({len(flagged)} pairs). A person decides what a match "
        f"means; the grade is unchanged.</p>\n{short}"
        '<table class="pairs"><tr><th>#</th><th>score</th><th>a</th><th>share of a</th>'
        f"<th>b</th><th>share of b</th><th></th></tr>\n{''.join(rows)}</table>\n"
        + "\n".join(sections)
    )
    return clean_page(
        f"<!DOCTYPE html><html><head><title>similarity {esc(result.module)}</title>"
        f"<style>{STYLE}</style></head><body>{body}</body></html>"
    )
