"""``--snapshot --format json`` is serialised by pydantic, as the slow path would print it."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from byconsole.headless.snapshot import print_json, print_model_json
from tests.tui.fleet_data import sample_snapshot

HOSTILE = "é\x1b[2J😀\u2028\x00\x7f\x85\u202e"


class Doc(BaseModel):
    text: str
    number: float
    items: list[str]


def _printed(capsys: pytest.CaptureFixture[str], write: object, value: object) -> str:
    write(value)  # type: ignore[operator]
    return capsys.readouterr().out


@pytest.mark.parametrize(
    "model",
    [Doc(text=HOSTILE, number=1e16, items=[HOSTILE, ""]), sample_snapshot()],
    ids=["hostile", "fleet"],
)
def test_same_document_as_the_slow_path_and_ascii_only(
    capsys: pytest.CaptureFixture[str], model: BaseModel
) -> None:
    fast = _printed(capsys, print_model_json, model)
    slow = _printed(capsys, print_json, model.model_dump(mode="json"))
    assert json.loads(fast) == json.loads(slow)
    assert fast.isascii() and "\x7f" not in fast and fast.endswith("}\n")


def test_text_pydantic_cannot_encode_takes_the_slow_path(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = _printed(capsys, print_model_json, Doc(text="a\udc80b", number=0, items=[]))
    assert json.loads(out)["text"] == "a\udc80b"
    assert "\\udc80" in out
