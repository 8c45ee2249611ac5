"""`vela collections` and `vela alias` against a real server: list and show (tables, --json), delete (asked on a
terminal, refused without --yes elsewhere, by its own name only), aliases set, switched and deleted; unknown names
and a wrong key refused as given (2), a name that is taken or an alias deleted as a collection a conflict (3)."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from vela_client import VelaClient

from cli.main import main as vela
from tests.cli.remote_server import API_KEY, NOTES, one_line, out_json, serving, table, use_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_embedder_dir: Path) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("cli-collections"), tiny_embedder_dir, notes=NOTES, other=NOTES[:3]) as url:
        yield url


@pytest.fixture
def client(server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[VelaClient]:
    use_server(server, monkeypatch)
    with VelaClient(server, api_key=API_KEY) as c:
        yield c
        for alias in c.list_aliases():  # each test starts without aliases
            c.delete_alias(alias.alias)


class Terminal(io.StringIO):
    """Standard input that is a terminal, holding what the user types."""

    def isatty(self) -> bool:
        return True


def test_list_and_show(client: VelaClient, capsys: pytest.CaptureFixture[str]) -> None:
    client.set_alias("live", "notes")
    client.set_alias("current", "notes")
    assert vela(["collections", "list"]) == 0
    rows = table(capsys)
    assert rows[0] == ["NAME", "DOCUMENTS", "PASSAGES", "SHARDS", "EMBEDDER", "CREATED", "ALIASES"]
    notes, other = rows[1:]
    assert notes[:5] == ["notes", "8", "8", "1", "unregistered"] and notes[-1] == "current,live"
    assert other[:4] == ["other", "3", "3", "1"] and other[-1] == "-"
    assert vela(["collections", "list", "--json"]) == 0
    listed = out_json(capsys)
    assert [c["name"] for c in listed] == ["notes", "other"] and listed[0]["documents"] == 8
    assert listed[0]["schema"] == {"fields": {}, "strict": False}

    assert vela(["collections", "show", "notes"]) == 0
    fields = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert fields["name"] == "notes" and fields["aliases"] == "current, live"
    assert (fields["documents"], fields["passages"], fields["shards"]) == ("8", "8", "1")
    assert fields["chunking"] == "max_tokens 224, overlap 32" and fields["schema"] == "no declared fields"
    assert fields["index"].startswith("1 segment, ") and "dense flat" in fields["index"]
    assert fields["generations"].startswith("current 0 (") and "previous -" in fields["generations"]
    assert vela(["collections", "show", "live"]) == 0  # through an alias: its collection, said so
    assert "name         notes (through the alias live)" in capsys.readouterr().out
    assert vela(["collections", "show", "notes", "--json"]) == 0
    shown = out_json(capsys)
    assert shown["name"] == "notes" and shown["passages"] == 8 and shown["generations"]["current"]["generation"] == 0


def test_delete_asks_on_a_terminal_and_refuses_elsewhere_without_yes(
    client: VelaClient, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client.index("scratch", NOTES[:2], wait=True)
    client.set_alias("scratch-live", "scratch")
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # a pipe: nobody to ask
    assert vela(["collections", "delete", "scratch"]) == 2
    err = one_line(capsys)
    assert (
        err
        == "vela collections: refusing to delete collection 'scratch' without --yes: standard input is not a terminal"
    )
    assert client.collection_exists("scratch")

    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    assert vela(["collections", "delete", "scratch"]) == 130
    asked = capsys.readouterr().err  # the answer's newline is the terminal's echo, not written here
    assert asked == (
        "Delete collection 'scratch' (2 documents, 2 passages; its aliases go with it: scratch-live)? "
        "This cannot be undone. [y/N] vela collections: not deleted: 'scratch' stays\n"
    )
    assert client.collection_exists("scratch")
    monkeypatch.setattr(sys, "stdin", Terminal(""))  # end of input (Ctrl-D): no
    assert vela(["collections", "delete", "scratch"]) == 130
    assert capsys.readouterr().err.endswith("[y/N] \nvela collections: not deleted: 'scratch' stays\n")

    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    assert vela(["collections", "delete", "scratch-live"]) == 3  # an alias: not asked, refused by the server
    assert "is an alias of 'scratch'" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    assert vela(["collections", "delete", "scratch"]) == 0
    assert capsys.readouterr().out.strip() == "deleted collection scratch"
    assert not client.collection_exists("scratch") and client.list_aliases() == []

    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    assert vela(["collections", "delete", "scratch"]) == 2  # asked about nothing: refused before the question
    assert "collection_not_found" in one_line(capsys)

    client.index("scratch", NOTES[:1], wait=True)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert vela(["collections", "delete", "scratch", "--yes"]) == 0
    assert capsys.readouterr().out.strip() == "deleted collection scratch"
    assert vela(["collections", "delete", "scratch", "--yes"]) == 2
    assert "no collection named 'scratch'" in one_line(capsys)


def test_refused_as_given(client: VelaClient, capsys: pytest.CaptureFixture[str]) -> None:
    assert vela(["collections", "show", "missing"]) == 2
    err = one_line(capsys)
    assert err.startswith("vela collections: no collection named 'missing'") and "collection_not_found" in err
    assert vela(["collections", "list", "--api-key", "wrong"]) == 2
    assert "unauthorized" in one_line(capsys)
    assert vela(["collections", "delete", "notes", "--yes", "--api-key", "wrong"]) == 2
    assert "unauthorized" in one_line(capsys)
    assert client.collection_exists("notes")


def test_alias_set_switch_list_delete(client: VelaClient, capsys: pytest.CaptureFixture[str]) -> None:
    assert vela(["alias", "list"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err.strip() == "no aliases"
    assert vela(["alias", "set", "live", "notes"]) == 0
    assert capsys.readouterr().out.strip() == "live -> notes"
    assert vela(["alias", "set", "live", "notes"]) == 0
    assert capsys.readouterr().out.strip() == "live -> notes (unchanged)"
    assert vela(["alias", "set", "backup", "other"]) == 0
    capsys.readouterr()
    assert vela(["alias", "list"]) == 0
    assert table(capsys) == [["ALIAS", "COLLECTION"], ["backup", "other"], ["live", "notes"]]
    assert vela(["alias", "set", "live", "other"]) == 0  # switched in one step
    assert capsys.readouterr().out.strip() == "live -> other (was notes)"
    assert vela(["alias", "list", "--json"]) == 0
    assert out_json(capsys) == [{"alias": "backup", "collection": "other"}, {"alias": "live", "collection": "other"}]
    assert client.get_collection("live").name == "other"

    assert vela(["alias", "delete", "live"]) == 0
    assert capsys.readouterr().out.strip() == "deleted alias live"
    assert [a.alias for a in client.list_aliases()] == ["backup"] and client.collection_exists("other")


def test_alias_refusals(client: VelaClient, capsys: pytest.CaptureFixture[str]) -> None:
    assert vela(["alias", "delete", "nope"]) == 2
    err = one_line(capsys)
    assert err.startswith("vela alias: no alias named 'nope'") and "alias_not_found" in err
    assert vela(["alias", "set", "live", "missing"]) == 2
    assert "no collection named 'missing'" in one_line(capsys)
    assert vela(["alias", "set", "other", "notes"]) == 3  # a collection has that name
    assert "conflict" in one_line(capsys)
    assert vela(["alias", "list", "--api-key", "wrong"]) == 2
    assert "unauthorized" in one_line(capsys)
    assert client.list_aliases() == []
