"""Operator-supplied text (model and tenant names, reasons, errors naming files) shown as written
in Streamlit markdown. Pure: no Streamlit import, so every page and the store-error view use it."""

from __future__ import annotations

import re

#: U+2060, shown as nothing: where it stands, Streamlit's markdown reads no shortcode and makes
#: no typographic replacement (a backslash does not stop either: they work on the text after
#: escapes are resolved)
WORD_JOINER = "\u2060"
#: a colon Streamlit would read as the start of a shortcode: `:smile:`, `:+1:`, `:material/home:`,
#: `:streamlit:`, or a directive such as `:red[...]` or `:small[...]` (a name, then `:` or `[`);
#: `127.0.0.1:5432 down` or `tenant:a b` stay as written, so an address copied from the page works
_SHORTCODE_COLON = re.compile(r":(?=[A-Za-z0-9_+\-][A-Za-z0-9_+\-/]*[:\[])")
#: what Streamlit replaces when it stands between whitespace (JavaScript's \s, which has U+FEFF)
#: or the ends of the text: <-> -> <- -- >= <= ~= become arrows, a dash and relations
_TYPOGRAPHIC = re.compile(r"(?:^|(?<=[\s\ufeff]))(?:<->|->|<-|--|>=|<=|~=)(?=[\s\ufeff]|$)")
#: a block marker at the start of a line (after at most 3 spaces; more make a code block):
#: a heading ``#`` to ``######``, a list item ``-``, ``+`` or ``1.``/``1)``, or a line of ``-``
#: or ``=`` alone, which underlines the line before as a heading or draws a rule (``*`` and ``>``
#: are escaped wherever they stand); each followed by a blank, or alone on its line
_BLOCK_MARKER = re.compile(r"^( {0,3})(#{1,6}(?=[ \t]|$)|[-+](?=[ \t]|$)|-+(?=[ \t]*$)"
                           r"|=+(?=[ \t]*$)|\d{1,9}[.)](?=[ \t]|$))", re.MULTILINE)


def _escaped_marker(marker: re.Match[str]) -> str:
    """``\\#``, ``\\-``, ``\\=``; a number keeps its digits: ``1\\.``."""
    indent, sign = marker[1], marker[2]
    if sign[0].isdigit():
        return f"{indent}{sign[:-1]}\\{sign[-1]}"
    return f"{indent}\\{sign}"


def escape_markdown(text: str) -> str:
    """``text`` shown as written in Streamlit markdown: no emphasis, links or math, and none of
    Streamlit's emoji, icons, colours or arrows. CommonMark syntax is backslash-escaped; a word
    joiner goes after a colon that starts a shortcode and inside a replaced sequence, so a copy
    of such a name from the page carries an invisible U+2060 (``llama--v2`` is not replaced and
    gets none). A line starts no heading, list or rule: its marker is escaped too (``\\# a``,
    ``\\- a``, ``1\\. a``)."""
    text = _SHORTCODE_COLON.sub(":" + WORD_JOINER, text)
    text = _TYPOGRAPHIC.sub(lambda m: m[0][0] + WORD_JOINER + m[0][1:], text)
    text = "".join("\\" + c if c in "\\`*_[]$<>|~" else c for c in text)
    return _BLOCK_MARKER.sub(_escaped_marker, text)
