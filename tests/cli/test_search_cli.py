"""`vela search` against a real server: a table of rank, score, id, title and snippet, --json, --mode, -k and
--filter; a malformed --filter refused in one line before any request (2), as are an unknown collection, a filter
the server refuses and a wrong key. Also what every command that talks to a server shares: a wrong key is 2, no
server is 1, and `vela --help` imports no client."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.main import main as vela
from tests.cli.remote_server import NOTES, one_line, out_json, serving, table, unused_url, use_server

ROOT = Path(__file__).resolve().parents[2]
SEA = '{"key": "topic", "match": {"value": "sea"}}'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("cli-search"), tiny_embedder_dir, notes=NOTES) as url:
        yield url


@pytest.fixture
def env(server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    use_server(server, monkeypatch)
    return server


def test_hits_as_a_table_and_as_json(env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert vela(["search", "notes", "tides and the moon"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["RANK", "SCORE", "ID", "TITLE", "SNIPPET"]
    assert len(lines) == 1 + len(NOTES)  # the server's default k is 10; there are 8
    rank, score, doc_id, *title_and_snippet = lines[1].split()
    assert rank == "1" and float(score) > 0 and doc_id in {d["id"] for d in NOTES}
    title, text = f"Note {doc_id[1:]}", NOTES[int(doc_id[1:])]["text"]
    snippet = " ".join(title_and_snippet[2:])
    assert title_and_snippet[:2] == title.split() and snippet.endswith("...") and len(snippet) == 60
    assert " ".join(text.split()).startswith(snippet[:-3])  # on one line: runs of spaces as one
    assert [line.split()[0] for line in lines[1:]] == [str(i) for i in range(1, len(NOTES) + 1)]

    assert vela(["search", "notes", "tides and the moon", "--json", "-k", "3"]) == 0
    answer = out_json(capsys)
    assert len(answer["hits"]) == 3 and answer["took_ms"] >= 0
    assert answer["hits"][0]["id"] == doc_id and answer["hits"][0]["text"] == text


def test_mode_k_and_filter(env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert vela(["search", "notes", "tides", "--mode", "bm25", "-k", "2"]) == 0
    rows = table(capsys)
    assert len(rows) == 3
    assert vela(["search", "notes", "tides", "--mode", "dense", "--filter", SEA, "--json"]) == 0
    hits = out_json(capsys)["hits"]
    assert {h["id"] for h in hits} == {"d1", "d3", "d5", "d7"} and all(h["ranks"]["bm25"] is None for h in hits)
    assert vela(["search", "notes", "tides", "--filter", "null", "-k", "8", "--json"]) == 0  # null: no filter
    assert len(out_json(capsys)["hits"]) == len(NOTES)

    assert vela(["search", "notes", "tides", "--group-by", "topic", "--json"]) == 0  # one hit per topic
    assert sorted(h["metadata"]["topic"] for h in out_json(capsys)["hits"]) == ["sea", "sky"]

    nothing = '{"key": "topic", "match": {"value": "land"}}'
    assert vela(["search", "notes", "tides", "--filter", nothing]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("no hits (")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{topic: sea}", "--filter: not JSON (Expecting property name enclosed in double quotes: line 1 column 2"),
        ('{"key": "topic"', "--filter: not JSON (Expecting ',' delimiter: line 1 column 16 (char 15))"),
        ('["sea"]', '--filter: a filter is a JSON object ({...}), not an array: ["sea"]'),
        ('"sea"', '--filter: a filter is a JSON object ({...}), not a string: "sea"'),
        ("true", "--filter: a filter is a JSON object ({...}), not a boolean: true"),
        ('[\n  "sea",\n  "sky"\n]', '--filter: a filter is a JSON object ({...}), not an array: [ "sea", "sky" ]'),
    ],
)
def test_a_malformed_filter_is_refused_before_any_request(
    text: str, said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VELA_API_KEY", raising=False)
    # No server listens there: the refusal comes before any request, or it would be "no Vela server answers" (1).
    assert vela(["search", "notes", "tides", "--filter", text, "--url", unused_url()]) == 2
    assert one_line(capsys).startswith(f"vela search: {said}")


def test_refused_as_given(env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert vela(["search", "missing", "tides"]) == 2
    err = one_line(capsys)
    assert err.startswith("vela search: no collection named 'missing'") and "collection_not_found" in err
    assert vela(["search", "notes", "tides", "--filter", '{"topic": "sea"}']) == 2  # JSON, but no filter
    assert "invalid_filter" in one_line(capsys)
    assert vela(["search", "notes", "tides", "--api-key", "wrong"]) == 2
    assert "unauthorized" in one_line(capsys)
    with pytest.raises(SystemExit) as usage:
        vela(["search", "notes", "tides", "--mode", "fuzzy"])
    assert usage.value.code == 2
    capsys.readouterr()


COMMANDS = [["jobs", "list"], ["jobs", "show", "x"], ["collections", "list"], ["alias", "list"], ["search", "n", "q"]]


def test_no_server_is_one_line_and_status_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VELA_API_KEY", raising=False)
    url = unused_url()  # one command: each tries the connection again before it gives up (a second)
    assert vela(["collections", "list", "--url", url]) == 1
    err = one_line(capsys)
    assert err.startswith(f"vela collections: no Vela server answers at {url}") and "connection_failed" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_an_address_without_its_scheme_is_refused_as_given(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert vela([*command, "--url", "127.0.0.1:8000"]) == 2
    assert one_line(capsys).startswith(f"vela {command[0]}: --url: '127.0.0.1:8000' is not an http:// or https:// URL")


def test_the_parser_imports_no_client() -> None:
    """argparse only at import: `vela --help` stays instant (a fresh interpreter: this one has the client)."""
    code = (
        "import sys; from cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in ('vela_client', 'httpx', 'tqdm') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_what_a_terminal_would_act_on_is_shown_escaped(env: str, capsys: pytest.CaptureFixture[str]) -> None:
    from vela_client import VelaClient

    from tests.cli.remote_server import API_KEY

    doc = {"id": "e\x1b[31mred", "title": "\x1b]0;pwned\x07T", "text": "zeta \x1b[2J cleared \u202eevil"}
    with VelaClient(env, api_key=API_KEY) as c:
        c.index("weird", [doc], wait=True)
    assert vela(["search", "weird", "zeta"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "e\\x1b[31mred" in out and "\\x1b]0;pwned\\x07T" in out and "\\u202eevil" in out


@pytest.mark.parametrize("key", ["secret\n", " secret", "s\u00e9cret"])
def test_a_key_no_header_can_carry_is_refused_without_showing_it(
    env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.setenv("VELA_API_KEY", key)
    assert vela(["search", "notes", "tides"]) == 2
    err = one_line(capsys)
    assert "VELA_API_KEY: the API key" in err and "secret" not in err and "cret" not in err, err
    assert vela(["search", "notes", "tides", "--api-key", key]) == 2
    assert "--api-key: the API key" in one_line(capsys)
