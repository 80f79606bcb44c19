"""compact_json writes what json.dumps(ensure_ascii=False, compact, default=str) writes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from worker_runtime.byframework import snapshot_json
from worker_runtime.jsontext import compact_json
from worker_runtime.models import Execution, ExecutionState

VALUES: list[Any] = [
    {"a": 1, "b": [1, 2, {"c": None}], "d": True, "e": 1.5},
    ["é", "日本", "\x00\x1b[31m\x7f", "\u2028\u202e", 'quote " and \\ backslash'],
    {"big": 2**63, "neg": -1, "empty": {}, "list": []},
    {ExecutionState.FAILED: ExecutionState.SUCCEEDED},
    [(1, 2), {"nested": [["x", "y"]]}],
]


@pytest.mark.parametrize("value", VALUES)
def test_the_same_document_as_json_dumps(value: Any) -> None:
    text = compact_json(value)
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    assert json.loads(text) == json.loads(expected)
    assert text == expected  # byte for byte, for these values


def test_non_ascii_stays_as_it_is() -> None:
    assert compact_json(["é"]) == '["é"]'


def test_text_that_is_not_utf8_falls_back_and_is_stored_escaped() -> None:
    text = compact_json({"name": "file-\udc80.txt", "other": "é"})
    text.encode("utf-8")  # what Redis is sent: must not raise
    # The surrogate is written as a JSON escape: a reader gets it back as it was.
    assert json.loads(text) == {"name": "file-\udc80.txt", "other": "é"}


def test_a_snapshot_with_a_lone_surrogate_is_encodable() -> None:
    execution = Execution(execution_id="e1", task_id="t1", worker_id="w", agent_type="a")
    execution.error = "OSError: file-\udc80.txt"
    text = snapshot_json(execution, 7)
    text.encode("utf-8")
    assert json.loads(text)["error_message"] == "OSError: file-\udc80.txt"


def test_an_unknown_type_is_written_as_its_str() -> None:
    class Odd:
        def __str__(self) -> str:
            return "odd!"

    assert json.loads(compact_json({"v": Odd()})) == {"v": "odd!"}


def test_a_snapshot_with_an_enum_state_reads_back_as_written() -> None:
    execution = Execution(execution_id="e1", task_id="t1", worker_id="w", agent_type="a")
    execution.state = ExecutionState.FAILED
    execution.error = "boom \u202e"
    doc = json.loads(snapshot_json(execution, 7))
    assert doc["state"] == "failed" and doc["status"] == "FAILED"
    assert doc["error_message"] == "boom \u202e" and doc["updated_at"] == 7
    assert Execution.parse(doc) == execution
