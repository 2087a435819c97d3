"""Student-derived text made inert before it reaches the instructor: feedback pages that run no
script, terminal lines without control sequences, spreadsheet cells without formulas."""

from __future__ import annotations

import html
import re
from pathlib import Path

# --- the terminal -------------------------------------------------------------------------------

# ESC sequences (CSI `ESC [ ... final`, OSC `ESC ] ... BEL or ESC \`, two-character ones), then
# any other control character: C0 but tab and newline, DEL, C1, and the bidirectional overrides
# that make a line read differently from what it holds
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?")
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: str) -> str:
    """`text` without anything a terminal would act on (cursor moves, erased lines, colours,
    hyperlinks, carriage returns, bells)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", str(text)))


# --- spreadsheets -------------------------------------------------------------------------------

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A CSV value a spreadsheet shows as text: a string that would start a formula gets a
    leading apostrophe (numbers are left as they are)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_row(row: dict) -> dict:
    return {key: csv_cell(value) for key, value in row.items()}


# --- feedback pages -----------------------------------------------------------------------------

TAGS = {
    *"a abbr b blockquote br caption code col colgroup dd del details div dl dt em".split(),
    *"figcaption figure h1 h2 h3 h4 h5 h6 hr i img ins kbd li mark ol p pre q s samp".split(),
    *"small span strike strong sub summary sup table tbody td tfoot th thead tr tt u ul".split(),
}
ATTRIBUTES = {
    "*": {"class", "id", "title", "lang", "dir"},
    "a": {"href"},
    "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan", "align"},
    "th": {"colspan", "rowspan", "align", "scope"},
    "ol": {"start"},
}
IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*\Z")


def _attribute(tag: str, name: str, value: str) -> str | None:
    """Inline data only as an image's source, and only a plain raster image (a plot)."""
    if value.strip().lower().startswith("data:"):
        return value if tag == "img" and name == "src" and IMAGE_DATA.match(value) else None
    return value


def clean_fragment(fragment: str) -> str:
    """HTML that displays the same text and structure, with no script, event handler, style,
    form, frame or javascript: link left in it."""
    import nh3

    return nh3.clean(
        fragment,
        tags=TAGS,
        clean_content_tags={"script", "style", "template", "iframe", "object", "noscript"},
        attributes=ATTRIBUTES,
        attribute_filter=_attribute,
        url_schemes={"http", "https", "mailto", "data"},
        link_rel="noopener noreferrer nofollow",
    )


def clean_page(page: str) -> str:
    """An nbconvert page rebuilt inert: the page's own style sheets (from the template, before
    <body>) kept as style sheets, its title as text, its body (the student's markdown and
    outputs) through clean_fragment. No script of any origin remains."""
    start = re.search(r"<body\b[^>]*>", page, re.I)
    head, body = (page[: start.start()], page[start.end() :]) if start else ("", page)
    end = body.lower().rfind("</body>")
    body = body[:end] if end >= 0 else body
    styles = re.findall(r"<style\b[^>]*>(.*?)</style\s*>", head, re.I | re.S)
    title = re.search(r"<title\b[^>]*>(.*?)</title\s*>", head, re.I | re.S)
    name = html.escape(html.unescape(title[1]).strip()) if title else "feedback"
    sheets = "".join(f"<style>\n{css}\n</style>\n" for css in styles)
    return (
        '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n'
        f"<title>{name}</title>\n{sheets}</head>\n<body>\n{clean_fragment(body)}\n</body>\n</html>\n"
    )


def clean_feedback(path: Path) -> None:
    """Rewrite a feedback page in place, inert (see clean_page)."""
    path.write_text(clean_page(path.read_text(encoding="utf-8", errors="replace")), "utf-8")
