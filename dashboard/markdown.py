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


def escape_markdown(text: str) -> str:
    """``text`` shown as written in Streamlit markdown: no emphasis, links or math, and none of
    Streamlit's emoji, icons, colours or arrows. CommonMark syntax is backslash-escaped; a word
    joiner goes after a colon that starts a shortcode and inside a replaced sequence, so a copy
    of such a name from the page carries an invisible U+2060 (``llama--v2`` is not replaced and
    gets none)."""
    text = _SHORTCODE_COLON.sub(":" + WORD_JOINER, text)
    text = _TYPOGRAPHIC.sub(lambda m: m[0][0] + WORD_JOINER + m[0][1:], text)
    return "".join("\\" + c if c in "\\`*_[]$<>|~" else c for c in text)
