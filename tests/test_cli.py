"""The command line as a user runs it: exit codes, output and files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deermem.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_demo_shows_both_situations(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "demo")
    assert code == 0
    assert "fact_confirm" in out
    assert "confidence: evicted fact_confirm" in out
    assert "hybrid-v1: evicted fact_stale90" in out
    assert "confidence: evicted fact_correct" in out
    assert "shadow: hybrid-v1 would evict fact_stale90 and disagrees" in out
    assert "why fact_confirm (confidence): archived; evicted at capacity" in out
    assert "restore fact_confirm after switching to hybrid-v1: back in the library" in out
    assert "the gate evicted fact_pref10 to the archive instead" in out


def test_demo_json_is_deterministic_and_tells_the_story(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, first, _ = run(capsys, "demo", "--json")
    _, second, _ = run(capsys, "demo", "--json")
    assert first == second
    data = json.loads(first)
    for scenario in data["scenarios"]:
        policies = scenario["policies"]
        assert policies["confidence"]["preciousKept"] is False
        assert policies["hybrid-v1"]["preciousKept"] is True
        assert policies["shadow"]["preciousKept"] is False  # shadow mode changes nothing
        assert scenario["shadow"]["disagrees"] is True
        [receipt] = policies["confidence"]["receipts"]
        assert receipt["trigger"] == "import"
        assert receipt["receiptId"].startswith("rcpt_")
        assert receipt["evicted"][0]["factId"] == scenario["preciousFactId"]
        assert scenario["why"]["status"] == "archived"
        assert scenario["restore"]["restored"] is True
        assert scenario["restore"]["receipts"][0]["trigger"] == "restore"


def test_demo_keeps_its_store_for_exploring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "demo"
    code, out, _ = run(capsys, "demo", "--root", str(root))
    assert code == 0
    assert "explore it with" in out
    code, out, _ = run(
        capsys,
        "--root",
        str(root),
        "--user",
        "demo",
        "--agent",
        "stale-vs-confirmed-confidence",
        "audit",
        "--json",
    )
    assert [r["trigger"] for r in json.loads(out)] == ["restore", "import"]  # newest first
    code, _, err = run(capsys, "demo", "--root", str(root))
    assert code == 2
    assert "is not empty" in " ".join(err.replace("│", " ").split())


def test_demo_keeps_its_store_at_the_global_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`deermem --root DIR demo`, as every other command takes --root, keeps the store there."""
    root = tmp_path / "demo"
    code, out, _ = run(capsys, "--root", str(root), "demo")
    assert code == 0
    assert f"The store is in {root}" in out
    code, out, _ = run(
        capsys, "--root", str(root), "--user", "demo", "--agent",
        "stale-vs-confirmed-confidence", "audit", "--json",
    )  # fmt: skip
    assert code == 0
    assert [r["trigger"] for r in json.loads(out)] == ["restore", "import"]  # newest first
    same = run(capsys, "--root", str(root), "demo", "--root", f"{tmp_path}/./demo")
    assert same[0] == 2  # the same directory both ways is fine; this one is not empty
    assert "is not empty" in " ".join(same[2].replace("│", " ").split())


def test_demo_refuses_two_different_roots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        capsys, "--root", str(tmp_path / "one"), "demo", "--root", str(tmp_path / "two")
    )
    assert code == 2
    said = " ".join(err.replace("│", " ").split())
    assert f"{tmp_path / 'two'} differs from the global --root {tmp_path / 'one'}" in said
    assert not (tmp_path / "one").exists()
    assert not (tmp_path / "two").exists()


def test_demo_rejects_a_bad_clock(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "demo", "--now", "tomorrow")
    assert code == 2
    assert "tomorrow" in err


@pytest.mark.parametrize(
    "args",
    [
        ("--now", "0001-01-01T00:00:00Z"),
        ("--now", "0001-06-30"),  # the seed fits; the archive's year of age limit does not
        ("--now", "0002-01-01T01:00:00+05:00"),  # the last hour of year 1 in UTC
        ("--learn", "--now", "0001-01-01"),
    ],
)
def test_demo_rejects_a_clock_too_early_for_its_seed(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    code, out, err = run(capsys, "demo", *args)
    assert (code, out) == (2, "")
    said = " ".join(err.replace("│", " ").split())
    assert "is before 0002-01-01T00:00:00Z" in said
    assert "Traceback" not in err


def test_demo_runs_at_the_earliest_clock(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "demo", "--now", "0002-01-01", "--json")
    assert code == 0, err
    assert json.loads(out)["now"] == "0002-01-01T00:00:00Z"


def test_config_check_prints_the_effective_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "deermem.toml"
    path.write_text('max_facts = 50\nfact_eviction_policy = "hybrid-v1"\n', "utf-8")
    monkeypatch.setenv("DEERMEM_EVICTION_AUDIT_MAX_ENTRIES", "17")
    code, out, _ = run(capsys, "config", "check", str(path), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["max_facts"] == 50
    assert data["fact_eviction_policy"] == "hybrid-v1"
    assert data["eviction_audit_max_entries"] == 17
    code, out, _ = run(capsys, "config", "check", str(path), "--ignore-env", "--json")
    assert json.loads(out)["eviction_audit_max_entries"] == 200
    code, out, _ = run(capsys, "config", "check", str(path))
    assert code == 0
    assert "hybrid-v1 *" in out
    assert "[correction]" in out


def test_config_check_loads_the_pattern_and_prompt_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A patterns_dir or prompts_dir every extraction would fail on is not "valid"."""
    patterns = tmp_path / "patterns"
    patterns.mkdir()
    (patterns / "goal.yaml").write_text("- '(unclosed'\n", "utf-8")
    path = tmp_path / "deermem.toml"
    path.write_text(f"patterns_dir = {json.dumps(str(patterns))}\n", "utf-8")
    code, out, err = run(capsys, "config", "check", str(path))
    assert code == 1
    assert "valid" not in out
    assert err.startswith(f"error: {patterns / 'goal.yaml'}: pattern 0 `(unclosed`: invalid")
    path.write_text(f"patterns_dir = {json.dumps(str(tmp_path / 'none'))}\n", "utf-8")
    code, _, err = run(capsys, "config", "check", str(path))
    assert code == 1
    assert f"{tmp_path / 'none'}: patterns_dir is not a directory" in err
    path.write_text(f"prompts_dir = {json.dumps(str(tmp_path / 'none'))}\n", "utf-8")
    code, _, err = run(capsys, "config", "check", str(path))
    assert code == 1
    assert f"{tmp_path / 'none'}: prompts_dir is not a directory" in err


def test_config_check_reports_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deermem.yaml"
    path.write_text("max_facts: 5\nmax_fact: 3\n", "utf-8")
    code, out, err = run(capsys, "config", "check", str(path))
    assert code == 1
    assert out == ""
    assert "max_facts = 5" in err
    assert "did you mean 'max_facts'" in err
    assert "Traceback" not in err


def test_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert "demo" in out
    assert "config" in out
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.startswith("deermem ")
    # A store deermem creates runs hybrid-v1: confidence is the original's default only.
    code, out, _ = run(capsys, "demo", "--help")
    assert "(the original's default)" in " ".join(out.split())


def test_what_a_fact_says_is_shown_never_sent_to_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An imported fact may hold an ESC sequence (clear the screen, retitle the window) or
    # a bidirectional override; the tables and sentences show them as escapes.
    document = tmp_path / "evil.json"
    evil = "evil \x1b[2J\x1b]0;pwned\x07 and \u202eright-to-left"
    document.write_text(json.dumps({"facts": [{"id": "fact_evil0001", "content": evil}]}))
    root = ["--root", str(tmp_path / "store"), "--user", "ann"]
    assert run(capsys, "--root", str(tmp_path / "store"), "init")[0] == 0
    assert run(capsys, *root, "import", str(document))[0] == 0
    for command in (["facts", "list"], ["facts", "show", "fact_evil0001"], ["search", "evil"]):
        code, out, _ = run(capsys, *root, *command)
        assert code == 0
        assert "\x1b" not in out
        assert "\x07" not in out
        assert "\u202e" not in out
        assert "\\x1b" in out


def test_a_file_a_command_writes_never_lands_inside_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Exporting alice "to" bob's memory.json, or to the store's settings, would replace them.
    store = tmp_path / "store"
    assert run(capsys, "--root", str(store), "init")[0] == 0
    for user in ("alice", "bob"):
        assert run(capsys, "--root", str(store), "--user", user, "facts", "add", "x")[0] == 0
    before = {path: path.read_bytes() for path in store.rglob("*") if path.is_file()}
    alice = ["--root", str(store), "--user", "alice"]
    for command in (
        ["export", str(store / "users" / "bob" / "memory.json")],
        ["export", str(store / "deermem.yaml")],
        ["users", "export", "alice", str(store / "users" / "alice" / "export.json")],
        ["regret", "--chart", str(store / "users" / "chart.png")],
    ):
        code, _, err = run(capsys, *alice, *command)
        assert code == 1, command
        assert "inside the store" in err
    after = {path: path.read_bytes() for path in store.rglob("*") if path.is_file()}
    assert after == before
    code, _, _ = run(capsys, *alice, "export", str(tmp_path / "alice.json"))
    assert code == 0
    # A new file of its own directly in the root is no file of the store's (cd ROOT; export).
    assert run(capsys, *alice, "export", str(store / "alice-backup.json"))[0] == 0


@pytest.mark.parametrize("layout", [("--user", "alice"), ()], ids=["users", "single-user"])
def test_a_file_a_command_writes_never_takes_a_name_the_store_makes_in_its_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: tuple[str, ...]
) -> None:
    """A fresh store has no ``users`` or ``agents`` yet: a file there would break every write."""
    store = tmp_path / "store"
    assert run(capsys, "--root", str(store), "init")[0] == 0
    for name in ("users", "agents"):
        for command in (
            ["export", str(store / name)],
            ["users", "export", "alice", str(store / name)],
            ["regret", "--chart", str(store / name)],
        ):
            code, _, err = run(capsys, "--root", str(store), *layout, *command)
            assert code == 1, command
            assert err.startswith(f"error: {store / name}: that is inside the store"), err
    assert not (store / "users").exists()
    assert not (store / "agents").exists()
    assert run(capsys, "--root", str(store), *layout, "facts", "add", "x")[0] == 0


def test_migrate_refuses_a_destination_that_would_write_into_its_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "m"
    assert run(capsys, "--root", str(source), "init")[0] == 0
    assert run(capsys, "--root", str(source), "--user", "u", "facts", "add", "x")[0] == 0
    (tmp_path / "afile").write_text("not a store")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    for destination, said in (
        (source / "users" / "u", "DST is inside SRC"),
        (source / "sub", "DST is inside SRC"),
        (tmp_path, "SRC is inside DST"),
        (tmp_path / "afile", "is a file"),
        ("http://x", "neither a directory nor a postgresql:// URL"),
        ("https://bob:Hunter2pw@x", "neither a directory nor a postgresql:// URL"),
        ("host=db user=app password=Hunter2pw", "reads as a libpq connection string"),
    ):
        code, _, err = run(capsys, "migrate", "--from", str(source), "--to", str(destination))
        assert code == 2, destination
        assert said in " ".join(err.replace("│", " ").split()), err
        assert "Hunter2pw" not in err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_migrate_copies_from_a_store_only_and_into_a_store_or_a_new_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The store's parent (a one-level typo) was read as a store of no user: "copied 0
    # user(s) ..., each verified", exit 0, and alice was not copied.
    store = tmp_path / "parent" / "store"
    assert run(capsys, "--root", str(store), "init")[0] == 0
    assert run(capsys, "--root", str(store), "--user", "alice", "facts", "add", "x")[0] == 0
    (tmp_path / "empty").mkdir()
    documents = tmp_path / "documents"
    documents.mkdir()
    (documents / "notes.txt").write_text("my notes", "utf-8")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    for source, destination, said in (
        (tmp_path / "parent", tmp_path / "copy", "the directory is neither empty nor a deermem"),
        (tmp_path / "empty", tmp_path / "copy", "no store there: the directory is empty"),
        (tmp_path / "nowhere", tmp_path / "copy", "no store there: the directory does not exist"),
        (store, documents, "neither empty nor a deermem store; a store is created in a new"),
    ):
        code, out, err = run(capsys, "migrate", "--from", str(source), "--to", str(destination))
        assert (code, out) == (1, ""), source
        assert err.startswith("error: "), err
        assert err.count("\n") == 1, err
        assert said in err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


_DEEP_JSON = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "where",
    [
        "import",
        "ingest",
        "config.toml",
        "config.yaml",
        "environment",
        "users/u/.memory.owner.json",
        "users/u/agents/__default__/.metadata/archive-index.json",
        "users/u/agents/__default__/.metadata/eviction-audit.json",
        "deermem.yaml",
    ],
)
def test_a_document_nested_past_the_parsers_depth_is_an_error_not_a_traceback(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    store = tmp_path / "s"
    root = ["--root", str(store), "--user", "u"]
    assert run(capsys, "--root", str(store), "init")[0] == 0
    assert run(capsys, *root, "facts", "add", "hello")[0] == 0
    [fact_id] = [
        fact["id"] for fact in json.loads(run(capsys, *root, "facts", "list", "--json")[1])
    ]
    assert run(capsys, *root, "facts", "rm", fact_id)[0] == 0  # an archive and an audit
    deep = tmp_path / "deep.json"
    deep.write_text(_DEEP_JSON)
    commands: list[list[str]] = [[*root, "facts", "list"], [*root, "search", "hello"]]
    if where == "import":
        commands = [[*root, "import", str(deep)]]
    elif where == "ingest":
        commands = [[*root, "ingest", str(deep)]]
    elif where.startswith("config."):
        config = tmp_path / where
        nested = "[" * 5000 + "]" * 5000
        config.write_text(
            f"max_facts = {nested}" if where.endswith("toml") else f"max_facts: {nested}"
        )
        commands = [
            ["config", "check", str(config)],
            ["--config", str(config), *root, "facts", "list"],
        ]
    elif where == "environment":
        monkeypatch.setenv("DEERMEM_PROTECTED_CATEGORIES", _DEEP_JSON)
    elif where == "deermem.yaml":
        (store / where).write_text("max_facts: " + "[" * 5000 + "]" * 5000)
    else:
        (store / where).write_text(_DEEP_JSON)
    for command in commands:
        code, _, err = run(capsys, *command)  # a traceback would raise out of main
        assert code in (0, 1, 2), command
        assert "Traceback" not in err
        if code:
            assert err.startswith(("error:", "Usage:")) or "Error" in err, err


def test_importing_an_export_older_than_a_fact_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--root", str(tmp_path / "s"), "--user", "ann"]
    assert run(capsys, "--root", str(tmp_path / "s"), "init")[0] == 0
    assert run(capsys, *store, "facts", "add", "Lives in Lyon")[0] == 0
    backup = tmp_path / "backup.json"
    assert run(capsys, *store, "export", str(backup))[0] == 0
    [fact] = json.loads(backup.read_text())["facts"]
    assert run(capsys, *store, "facts", "edit", fact["id"], "-c", "Lives in Lille")[0] == 0
    code, _, err = run(capsys, *store, "import", str(backup))
    assert code == 1
    message = " ".join(err.split())
    assert "is at revision 2 in the store and 1 in the document" in message
    assert "remove the fact's `revision`" in message
    document = json.loads(backup.read_text())
    del document["facts"][0]["revision"]
    backup.write_text(json.dumps(document))
    assert run(capsys, *store, "import", str(backup))[0] == 0  # as the message says
    code, out, _ = run(capsys, *store, "facts", "list", "--json")
    assert [f["content"] for f in json.loads(out)] == ["Lives in Lyon"]


def test_a_root_that_exists_and_is_no_directory_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "--root", "/dev/null", "facts", "list")
    assert code == 2
    assert "/dev/null exists and is not a directory" in " ".join(err.replace("│", " ").split())


def test_a_category_too_long_is_refused_without_its_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    category = "ci sk" + "-proj-Ab3dEf7hIjKlMn0pQrStUvWxYz12345678 " + "y" * 40
    assert run(capsys, "--root", str(tmp_path / "s"), "init")[0] == 0
    root = ["--root", str(tmp_path / "s"), "--user", "gus"]
    code, out, err = run(capsys, *root, "facts", "add", "Gus likes tea.", "-c", category)
    assert code == 1
    assert "Ab3dEf7hIjKl" not in out + err
    assert f"field 'category' has a text of {len(category)} characters" in err
