"""escape_markdown keeps operator-supplied text (model and tenant names, reasons, file names) out
of Streamlit's markdown: CommonMark syntax is backslash-escaped, and a word joiner (U+2060, shown
as nothing) goes where Streamlit's own additions would read a shortcode (`:smile:`,
`:material/home:`, `:red[...]`) or a typographic replacement (` -> ` becoming an arrow). Whether a
browser then shows the text as written is checked in test_browser_pages.py. A line of the text
starts no heading, list, quote or rule: its marker is backslash-escaped."""

from __future__ import annotations

import re

from dashboard_support import as_shown as shown
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from dashboard.markdown import WORD_JOINER, escape_markdown

#: what Streamlit's markdown reads after a colon: directive names (`:red[`), emoji shortcodes
#: (`:smile:`, `:+1:`), `:material/...:` and `:streamlit:`
SHORTCODE_START = re.compile(r":[A-Za-z0-9_+\-][A-Za-z0-9_+\-/]*[:\[]")
#: Streamlit's typographic replacements, each between whitespace or the ends of a text
TYPOGRAPHIC = re.compile(r"(?:^|(?<=\s))(?:<->|->|<-|--|>=|<=|~=)(?=\s|$)")


def test_a_colon_before_a_name_character_is_followed_by_a_word_joiner() -> None:
    assert escape_markdown("llama:smile:") == f"llama:{WORD_JOINER}smile:"
    assert escape_markdown("a:red[b]") == f"a:{WORD_JOINER}red\\[b\\]"
    assert escape_markdown(":material/home:") == f":{WORD_JOINER}material/home:"
    assert escape_markdown("c:+1:") == f"c:{WORD_JOINER}+1:"


def test_a_colon_before_a_space_or_the_end_is_left_alone() -> None:
    assert escape_markdown("Unplaced: llama:") == "Unplaced: llama:"


def test_a_colon_that_opens_no_shortcode_gets_no_word_joiner() -> None:
    """An address or a port in an error stays copyable as it is shown."""
    assert escape_markdown("server at 127.0.0.1:5432 failed") == "server at 127.0.0.1:5432 failed"
    assert escape_markdown("tenant:a b") == "tenant:a b"


def test_an_arrow_or_dash_between_spaces_is_split_by_a_word_joiner() -> None:
    assert escape_markdown("a -> b") == f"a -{WORD_JOINER}\\> b"
    assert escape_markdown("a <-> b") == f"a \\<{WORD_JOINER}-\\> b"
    assert escape_markdown("-- b ~=") == f"-{WORD_JOINER}- b \\~{WORD_JOINER}="


def test_an_arrow_or_dash_inside_a_word_is_left_as_written() -> None:
    """Streamlit replaces only a sequence standing alone, so a name such as llama--v2 copied from
    the page is the name the CLI knows."""
    assert escape_markdown("llama--v2->x") == "llama--v2-\\>x"


@given(st.text(alphabet=st.sampled_from(list(" :-<>=~[]()*_`$\\|#abc+/\n")), max_size=40))
def test_any_text_is_shown_as_written_and_leaves_no_shortcode_or_replacement(text: str) -> None:
    escaped = escape_markdown(text)
    assert shown(escaped) == text
    text_node = re.sub(r"\\(.)", r"\1", escaped)  # as Streamlit's plugins read it, joiners kept
    assert not SHORTCODE_START.search(text_node)
    assert not TYPOGRAPHIC.search(text_node)


def test_a_heading_marker_at_the_start_of_a_line_is_escaped() -> None:
    assert escape_markdown("# llama") == "\\# llama"
    assert escape_markdown("## a\n  ###### b\n#") == "\\## a\n  \\###### b\n\\#"


def test_a_list_or_quote_marker_at_the_start_of_a_line_is_escaped() -> None:
    assert escape_markdown("- a") == "\\- a"
    assert escape_markdown("+ a\n* b\n> c") == "\\+ a\n\\* b\n\\> c"
    assert escape_markdown("1. a\n 2) b\n123456789. c") == "1\\. a\n 2\\) b\n123456789\\. c"


def test_a_line_that_would_underline_a_heading_or_draw_a_rule_is_escaped() -> None:
    assert escape_markdown("a\n---") == "a\n\\---"
    assert escape_markdown("a\n=== ") == "a\n\\=== "
    assert escape_markdown("a\n- - -") == "a\n\\- - -"


def test_a_sign_that_starts_no_block_is_left_as_written() -> None:
    assert escape_markdown("#1 model") == "#1 model"
    assert escape_markdown("-x\n+1\n2024.1 q4\n1.5x\n=x") == "-x\n+1\n2024.1 q4\n1.5x\n=x"
    assert escape_markdown("llama # big - v1. 2) ok") == "llama # big - v1. 2) ok"
    assert escape_markdown("    - code") == "    - code"  # an indented code block already


#: a line as an operator may write one: up to 3 spaces, then block markers, digits and words
_LINES = st.lists(st.tuples(
    st.integers(0, 3),
    st.text(alphabet=st.sampled_from(list("#-+*=>.)19a \t")), max_size=12).map(
        lambda t: t.lstrip(" \t"))), max_size=5).map(
    lambda lines: "\n".join(" " * indent + text for indent, text in lines))
_COMMONMARK = MarkdownIt("commonmark")


@given(_LINES)
def test_no_line_of_any_text_starts_a_heading_list_quote_or_rule(text: str) -> None:
    escaped = escape_markdown(text)
    assert shown(escaped) == text
    blocks = {t.type for t in _COMMONMARK.parse(escaped) if t.block}
    assert blocks <= {"paragraph_open", "inline", "paragraph_close"}, (text, blocks)
