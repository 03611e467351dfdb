"""Commands over memory as a whole: export, import, scopes, reindex, search after hand edits."""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from deermem.cli import main
from tests.postgres_plugin import client_connections


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def with_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def add(capsys: pytest.CaptureFixture[str], root: Path, user: str, *args: str) -> str:
    code, out, err = run(
        capsys, "--root", str(root), "--user", user, "facts", "add", *args, "--json"
    )
    assert code == 0, err
    fact_id = json.loads(out)["factId"]
    assert isinstance(fact_id, str)
    return fact_id


@pytest.fixture
def alice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A store where alice has three facts, one of them confirmed by an edit history."""
    assert run(capsys, "--root", str(tmp_path), "init")[0] == 0
    add(capsys, tmp_path, "alice", "Use uv, not pip", "-c", "correction", "--confidence", "0.9")
    add(capsys, tmp_path, "alice", "Drinks green tea every morning", "--confidence", "0.8")
    fact_id = add(capsys, tmp_path, "alice", "Learns Rust", "-c", "goal", "-t", "rust")
    edit = ("facts", "edit", fact_id, "--confidence", "0.7")
    assert run(capsys, "--root", str(tmp_path), "--user", "alice", *edit)[0] == 0
    return tmp_path


# --- export and import ----------------------------------------------------------------------


def test_export_to_stdout_and_import_from_stdin_is_lossless(
    capsys: pytest.CaptureFixture[str], alice: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, exported, _ = run(capsys, "--root", str(alice), "--user", "alice", "export")
    assert code == 0
    document = json.loads(exported)
    assert len(document["facts"]) == 3
    with_stdin(monkeypatch, exported.encode("utf-8"))
    code, out, _ = run(capsys, "--root", str(alice), "--user", "bob", "import", "--json")
    assert code == 0
    assert len(json.loads(out)["kept"]) == 3
    code, again, _ = run(capsys, "--root", str(alice), "--user", "bob", "export")
    assert code == 0
    copied = json.loads(again)
    # Every field of every fact survives (revision, updatedAt, topics ...), the scope aside,
    # and so do the summaries; the store's own revision and stamp are bob's.
    for fact in (*document["facts"], *copied["facts"]):
        fact.pop("scope", None)
    assert copied["facts"] == document["facts"]
    assert (copied["user"], copied["history"]) == (document["user"], document["history"])


def test_export_to_a_file_and_import_from_it_reports_what_the_gate_did(
    capsys: pytest.CaptureFixture[str], alice: Path, tmp_path: Path
) -> None:
    target = tmp_path / "alice.json"
    code, out, _ = run(capsys, "--root", str(alice), "--user", "alice", "export", str(target))
    assert (code, out) == (0, "")
    document = json.loads(target.read_text("utf-8"))
    # Import into a store at a cap of 10 with 12 facts: the gate evicts 2, and says so.
    document["facts"] += [
        {"content": f"Extra fact {number}", "category": "context", "confidence": 0.1}
        for number in range(9)
    ]
    target.write_text(json.dumps(document), "utf-8")
    other = tmp_path / "other"
    (other).mkdir()
    (other / "deermem.yaml").write_text("max_facts: 10\n", "utf-8")
    code, out, _ = run(capsys, "--root", str(other), "--user", "carol", "import", str(target))
    assert code == 0
    assert "kept 10" in out
    assert "evicted 2 at capacity" in out
    code, out, _ = run(capsys, "--root", str(other), "--user", "carol", "audit", "--json")
    [receipt] = json.loads(out)
    assert receipt["trigger"] == "import"
    # Importing again replaces: facts not in the document leave for the archive.
    document["facts"] = document["facts"][:1]
    target.write_text(json.dumps(document), "utf-8")
    code, out, _ = run(capsys, "--root", str(other), "--user", "carol", "import", str(target))
    assert code == 0
    assert "replaced 9 not in the document (to the archive)" in out


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"facts": [', "(line 1, column 12): not JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b"\xff\xfe", "not UTF-8"),
        (b'{"facts": [{"content": ""}]}', "content"),
        # The file is named, and the field by where it stands in the document (not by an
        # id deermem chose for it); a missing list is said to be missing, not None.
        (b'{"facts": [{"content": 5}]}', "bad.json: field 'facts[0].content' has value 5"),
        (b'{"facts": [{"id": "f1", "content": 5}]}', "bad.json: fact 'f1': field 'content'"),
        (b"{}", "bad.json: field 'facts' has value <missing>"),
        (b'{"format": "deermem.user-export"}', "bad.json: field 'version'"),
        # Python's reader takes NaN and the infinities; stored, one made the user's
        # document unreadable over HTTP (and is no JSON any other reader takes).
        (
            b'{"facts": [{"content": "x", "extra": NaN}]}',
            "bad.json: not JSON: NaN is not a JSON number",
        ),
        (b'{"facts": [], "user": {"a": -Infinity}}', "-Infinity is not a JSON number"),
    ],
)
def test_import_refuses_a_bad_document_and_changes_nothing(
    capsys: pytest.CaptureFixture[str], alice: Path, tmp_path: Path, content: bytes, expected: str
) -> None:
    before = run(capsys, "--root", str(alice), "--user", "alice", "export")[1]
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    code, out, err = run(capsys, "--root", str(alice), "--user", "alice", "import", str(bad))
    assert code == 1
    assert out == ""
    assert expected in err
    assert "Traceback" not in err
    assert run(capsys, "--root", str(alice), "--user", "alice", "export")[1] == before


def test_import_names_a_missing_file(capsys: pytest.CaptureFixture[str], alice: Path) -> None:
    code, _, err = run(capsys, "--root", str(alice), "import", str(alice / "nope.json"))
    assert code == 1
    assert "nope.json: no such file" in err


def test_export_into_a_missing_directory_fails_cleanly(
    capsys: pytest.CaptureFixture[str], alice: Path, tmp_path: Path
) -> None:
    target = tmp_path / "no" / "such" / "dir.json"
    code, _, err = run(capsys, "--root", str(alice), "--user", "alice", "export", str(target))
    assert code == 1
    assert "its directory does not exist" in err


@pytest.mark.parametrize(
    "command",
    [
        ("--user", "alice", "export"),
        ("users", "export", "alice"),
    ],
)
def test_writing_to_a_directory_names_the_directory(
    capsys: pytest.CaptureFixture[str],
    alice: Path,
    tmp_path_factory: pytest.TempPathFactory,
    command: tuple[str, ...],
) -> None:
    """Not the temporary file that would have been written beside it."""
    outdir = tmp_path_factory.mktemp("outdir")
    code, _, err = run(capsys, "--root", str(alice), *command, str(outdir))
    assert code == 1
    assert err == f"error: {outdir}: is a directory; give a file name\n"
    assert list(outdir.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ("--user", "alice", "export"),
        ("users", "export", "alice"),
        ("--user", "alice", "regret", "--chart"),
    ],
)
def test_writing_to_a_pipe_or_a_device_is_refused_and_leaves_it(
    capsys: pytest.CaptureFixture[str],
    alice: Path,
    tmp_path_factory: pytest.TempPathFactory,
    command: tuple[str, ...],
) -> None:
    """A rename over a FIFO or a device node would put a regular file in its place."""
    outdir = tmp_path_factory.mktemp("outdir")
    pipe = outdir / "pipe"
    os.mkfifo(pipe)
    device = outdir / "null"  # a link to a device: what it names is checked
    device.symlink_to(os.devnull)
    for target in (pipe, device):
        code, out, err = run(capsys, "--root", str(alice), *command, str(target))
        assert code == 1
        assert out == ""
        assert err == f"error: {target}: not a regular file (a device, a pipe or a socket)\n"
    assert stat.S_ISFIFO(pipe.lstat().st_mode)
    assert device.is_symlink()
    assert stat.S_ISCHR(Path(os.devnull).stat().st_mode)
    assert sorted(path.name for path in outdir.iterdir()) == ["null", "pipe"]


@pytest.mark.parametrize(
    "command",
    [
        ("--user", "alice", "export"),
        ("users", "export", "alice"),
    ],
)
def test_an_export_over_a_private_file_stays_private(
    capsys: pytest.CaptureFixture[str],
    alice: Path,
    tmp_path_factory: pytest.TempPathFactory,
    command: tuple[str, ...],
) -> None:
    """The file is replaced by a rename: the new one keeps the old one's permissions, as a
    shell's ``>`` would, never the default mode that lets every local user read the memory."""
    target = tmp_path_factory.mktemp("outdir") / "alice.json"
    target.write_bytes(b"")
    target.chmod(0o600)
    code, _, err = run(capsys, "--root", str(alice), *command, str(target))
    assert code == 0, err
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert "Drinks green tea" in target.read_text(encoding="utf-8")


# --- scopes ---------------------------------------------------------------------------------


def test_scopes_lists_users_and_agents_with_their_counts(
    capsys: pytest.CaptureFixture[str], alice: Path
) -> None:
    add(capsys, alice, "alice@example.com", "Writes Go")  # a user id that is not a plain name
    coder = ("--root", str(alice), "--user", "alice", "--agent", "coder")
    assert run(capsys, *coder, "facts", "add", "Uses vim")[0] == 0
    run(capsys, "--root", str(alice), "facts", "add", "The single-user layout")
    fact_id = add(capsys, alice, "alice", "Short-lived")
    assert run(capsys, "--root", str(alice), "--user", "alice", "facts", "rm", fact_id)[0] == 0
    code, out, _ = run(capsys, "--root", str(alice), "scopes", "--json")
    assert code == 0
    assert json.loads(out) == [
        {"user": None, "agent": "__default__", "facts": 1, "archived": 0},
        {"user": "alice", "agent": "__default__", "facts": 3, "archived": 1},
        {"user": "alice", "agent": "coder", "facts": 1, "archived": 0},
        {"user": "alice@example.com", "agent": "__default__", "facts": 1, "archived": 0},
    ]
    code, out, _ = run(capsys, "--root", str(alice), "scopes")
    assert code == 0
    assert "alice@example.com" in out


def test_scopes_writes_out_what_a_user_id_hides(
    capsys: pytest.CaptureFixture[str], alice: Path
) -> None:
    """Three users whose ids all read "admin" are three rows a person can tell apart."""
    for user in ("admin", "ad\u200bmin", "admin\u2060"):
        add(capsys, alice, user, "Holds the keys")
    code, out, _ = run(capsys, "--root", str(alice), "scopes")
    assert code == 0
    assert "ad\\u200bmin" in out
    assert "admin\\u2060" in out
    assert "\u200b" not in out
    assert "\u2060" not in out
    code, out, _ = run(capsys, "--root", str(alice), "scopes", "--json")
    assert {row["user"] for row in json.loads(out)} >= {"admin", "ad\u200bmin", "admin\u2060"}


def test_scopes_of_an_empty_store(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "--root", str(tmp_path), "scopes", "--json")
    assert (code, json.loads(out)) == (0, [])


# --- reindex, and search after hand edits ------------------------------------------------------


def index_rows(root: Path) -> int:
    with sqlite3.connect(root / ".retrieval" / "memory-fts5.sqlite3") as db:
        count = db.execute("SELECT count(*) FROM doc").fetchone()[0]
    assert isinstance(count, int)
    return count


def test_reindex_rebuilds_a_deleted_or_garbled_index(
    capsys: pytest.CaptureFixture[str], alice: Path
) -> None:
    add(capsys, alice, "bob", "Plays chess")
    index = alice / ".retrieval" / "memory-fts5.sqlite3"
    code, out, _ = run(capsys, "--root", str(alice), "reindex", "--json")
    assert code == 0
    assert json.loads(out) == {"scopes": 2, "facts": 4, "location": str(index)}
    assert index_rows(alice) == 4
    index.write_bytes(b"garbage" * 1000)
    code, out, _ = run(capsys, "--root", str(alice), "reindex")
    assert code == 0
    assert "indexed 4 facts of 2 user/agent scope(s)" in out
    assert index_rows(alice) == 4


def test_reindex_where_the_index_cannot_be_written_is_one_error_line(
    capsys: pytest.CaptureFixture[str], alice: Path
) -> None:
    retrieval = alice / ".retrieval"
    shutil.rmtree(retrieval, ignore_errors=True)
    retrieval.write_text("not a directory", "utf-8")  # no index can live under it
    code, out, err = run(capsys, "--root", str(alice), "reindex")
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert ".retrieval" in err
    assert "Traceback" not in err


def test_search_finds_a_fact_edited_by_hand(
    capsys: pytest.CaptureFixture[str], alice: Path
) -> None:
    scope = ("--root", str(alice), "--user", "alice")
    code, out, _ = run(capsys, *scope, "search", "tea", "--json")
    [hit] = [h for h in json.loads(out) if h["bm25"] is not None]  # by its words
    [path] = alice.glob(f"users/alice/agents/__default__/facts/*/{hit['fact']['id']}.md")
    path.write_text(path.read_text("utf-8").replace("green tea", "black coffee"), "utf-8")
    code, out, _ = run(capsys, *scope, "search", "tea", "--json")
    by_words = [h for h in json.loads(out) if h["bm25"] is not None]
    assert (code, by_words) == (0, [])  # not found by its old words
    code, out, _ = run(capsys, *scope, "search", "coffee", "--json")
    [hit] = [h for h in json.loads(out) if h["bm25"] is not None]
    assert (hit["fact"]["content"], hit["matchType"]) == (
        "Drinks black coffee every morning",
        "hybrid",
    )


def test_a_user_directory_whose_id_cannot_be_told_is_reported(
    capsys: pytest.CaptureFixture[str], alice: Path
) -> None:
    # Not a name deermem derives from any id, and no fact or archived fact names its user.
    stray = alice / "users" / "carol@example.com"
    (stray / "agents" / "__default__" / ".metadata").mkdir(parents=True)
    (stray / "agents" / "__default__" / ".metadata" / "fact-usage.json").write_text("{}")
    code, out, err = run(capsys, "--root", str(alice), "scopes", "--json")
    # Listed what it can, and names what it cannot on stderr: never left out silently (issue 20).
    assert code == 1
    assert [entry["user"] for entry in json.loads(out)] == ["alice"]
    assert err.startswith("error: ")
    assert str(stray) in err
    assert err.count("\n") == 1


def test_scopes_and_reindex_on_a_database(
    capsys: pytest.CaptureFixture[str], postgres_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "db.yaml"
    config.write_text(f"store: {postgres_url}\n", "utf-8")
    base = ("--config", str(config))
    assert run(capsys, *base, "--user", "alice", "facts", "add", "Likes tea")[0] == 0
    code, out, _ = run(capsys, *base, "scopes", "--json")
    assert (code, json.loads(out)) == (
        0,
        [{"user": "alice", "agent": "__default__", "facts": 1, "archived": 0}],
    )
    code, out, _ = run(capsys, *base, "reindex")
    # Each process keeps its index in memory; reindex embeds the facts for search by
    # meaning, and the database keeps their vectors (docs/search.md).
    assert (code, "embedded 1 facts of 1 user/agent scope(s)" in out) == (0, True)
    code, out, _ = run(capsys, *base, "config", "show", "--json")
    assert (json.loads(out)["root"], json.loads(out)["storeFile"]) == (None, None)
    assert not (tmp_path / "deermem.yaml").exists()


def test_a_command_on_a_database_closes_its_connections_when_it_ends(
    capsys: pytest.CaptureFixture[str], postgres_url: str, tmp_path: Path
) -> None:
    """Run in-process, a command leaves no connection pool behind (nothing for the collector)."""
    config = tmp_path / "db.yaml"
    config.write_text(f"store: {postgres_url}\n", "utf-8")
    assert run(capsys, "--config", str(config), "--user", "bob", "facts", "add", "Tea")[0] == 0
    assert client_connections(postgres_url, settle=10) == 0
