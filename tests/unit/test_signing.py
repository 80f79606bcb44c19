"""Signed control entries (worker_runtime/signing.py): what makes a push attributable."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker_runtime.settings import ConfigError
from worker_runtime.signing import (
    FUTURE_TOLERANCE_MS,
    SIG_FIELD,
    load_control_secret,
    push_refusal,
    signed,
    verified,
)

SECRET = b"fleet-control-secret-0123456789"
FIELDS = {"kind": "command", "data": '{"action":"lifecycle","lifecycle":"evicted"}'}
STREAM = "byai_gateway:ctrl:worker:w-1"


def test_no_secret_configured_is_none() -> None:
    assert load_control_secret({}) is None
    assert load_control_secret({"BYAI_CONTROL_SECRET": ""}) is None


def test_the_secret_comes_from_the_env_or_a_file(tmp_path: Path) -> None:
    assert load_control_secret({"BYAI_CONTROL_SECRET": SECRET.decode()}) == SECRET
    path = tmp_path / "secret"
    path.write_text(SECRET.decode() + "\nignored\n")
    env = {"BYAI_CONTROL_SECRET_FILE": str(path), "BYAI_CONTROL_SECRET": "the-file-wins-0123"}
    assert load_control_secret(env) == SECRET


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"BYAI_CONTROL_SECRET_FILE": "/nonexistent/secret"}, "cannot be read"),
        ({"BYAI_CONTROL_SECRET": "short-secret"}, "at least 16 characters"),
    ],
)
def test_a_bad_secret_is_one_line_without_its_content(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_control_secret(env)
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert "short-secret" not in text


def test_an_empty_secret_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        load_control_secret({"BYAI_CONTROL_SECRET_FILE": str(path)})


def test_a_signature_binds_every_field_and_the_stream() -> None:
    entry = signed(SECRET, STREAM, dict(FIELDS))
    assert verified(SECRET, STREAM, entry)
    assert not verified(SECRET, "byai_gateway:ctrl:worker:w-2", entry)  # copied elsewhere
    assert not verified(b"another-secret-0123456789", STREAM, entry)
    assert not verified(SECRET, STREAM, {**entry, "data": entry["data"].replace("evicted", "x")})
    assert not verified(SECRET, STREAM, {**entry, "extra": "1"})
    assert not verified(SECRET, STREAM, dict(FIELDS))  # unsigned
    assert signed(None, STREAM, dict(FIELDS)) == FIELDS  # no secret: nothing added


def test_push_refusals() -> None:
    now = 1_800_000_000_000
    entry = signed(SECRET, STREAM, dict(FIELDS))
    assert push_refusal(SECRET, STREAM, entry, now, now) is None
    assert push_refusal(None, STREAM, FIELDS, now, now) is None  # no secret: accepted
    unsigned = push_refusal(SECRET, STREAM, FIELDS, now, now)
    assert unsigned is not None and "unsigned" in unsigned
    forged = push_refusal(SECRET, STREAM, {**FIELDS, SIG_FIELD: "0" * 64}, now, now)
    assert forged is not None and "does not match" in forged
    ahead = now + FUTURE_TOLERANCE_MS + 1
    future = push_refusal(None, STREAM, FIELDS, ahead, now)
    assert future is not None and "from the future" in future
    assert push_refusal(None, STREAM, FIELDS, now + FUTURE_TOLERANCE_MS, now) is None
