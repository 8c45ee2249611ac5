"""`vela token`: the token it prints verifies with its key and grants what the flags say; bad arguments exit 2."""

from __future__ import annotations

import json

import pytest

from cli.main import main as vela
from service.access_tokens import CollectionGrant, verify

KEY = "cli-key-0123456789abcdef0123456789abc"


def test_the_token_grants_what_the_flags_say(capsys: pytest.CaptureFixture[str]) -> None:
    pin = {"must": [{"key": "tenant", "match": {"value": "acme"}}]}
    args = ["token", "--key", KEY, "--write", "drafts", "--read", "notes", "--filter", json.dumps(pin)]
    assert vela([*args, "--expires", "90m"]) == 0
    access = verify(capsys.readouterr().out.strip().encode(), [KEY.encode()])
    assert access.grant is not None and dict(access.grant.collections) == {
        "drafts": CollectionGrant(write=True, filter=None),
        "notes": CollectionGrant(write=False, filter=pin),
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--key", KEY], "--read or --write"),
        (["--key", "short", "--read", "n"], "at least 32 bytes"),
        (["--key", KEY, "--read", "n", "--filter", "{"], "not JSON"),
        (["--key", KEY, "--read", "n", "--filter", "[1]"], "JSON object"),
        (["--key", KEY, "--write", "n", "--filter", "{}"], "--read"),
        (["--key", KEY, "--read", "n", "--write", "n"], "--write reads too"),
        (["--key", KEY, "--read", "n", "--expires", "0"], "--expires"),
        (["--key", KEY, "--read", "n", "--expires", "1w"], "--expires"),
    ],
)
def test_bad_arguments_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VELA_API_KEY", raising=False)
    assert vela(["token", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vela token: ") and message in err, err


def test_no_key_exits_2(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VELA_API_KEY", raising=False)
    assert vela(["token", "--read", "n"]) == 2
    assert "VELA_API_KEY" in capsys.readouterr().err
