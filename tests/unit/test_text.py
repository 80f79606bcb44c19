"""safe_text: hostile strings become visible, single-line, bounded and markup-inert."""

from __future__ import annotations

import io

from rich.console import Console

from byconsole.text import ELLIPSIS, safe, safe_text


def test_escape_and_osc_sequences_are_visible() -> None:
    hostile = "\x1b[31mred\x1b]52;c;aGk=\x07\x9b2J"
    out = safe_text(hostile)
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert out == "\\x1b[31mred\\x1b]52;c;aGk=\\x07\\x9b2J"


def test_newlines_tabs_bidi_and_surrogates() -> None:
    assert safe_text("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert safe_text("id\u202eevil") == "id\\u202eevil"
    assert safe_text("x\u2028y") == "x\\u2028y"
    assert safe_text("lone\ud800") == "lone\\ud800"


def test_plain_unicode_is_kept() -> None:
    assert safe_text("worker-é-中文-🙂") == "worker-é-中文-🙂"


def test_none_bytes_and_objects() -> None:
    assert safe_text(None) == ""
    assert safe_text(b"w\xff1") == "w\ufffd1"
    assert safe_text(42) == "42"


def test_long_values_are_cut_with_an_ellipsis() -> None:
    out = safe_text("x" * 10_000, limit=50)
    assert len(out) == 50 and out.endswith(ELLIPSIS)
    escaped = safe_text("\x1b" * 100, limit=20)
    assert len(escaped) == 20 and escaped.endswith(ELLIPSIS)
    assert safe_text("short", limit=5) == "short"
    assert len(safe_text("y" * 500, limit=0)) == 500


def test_markup_is_rendered_literally() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=80)
    console.print(safe("[bold red]boom[/] [@click=app.quit]x[/]"))
    assert buf.getvalue().strip() == "[bold red]boom[/] [@click=app.quit]x[/]"
