"""What a command-line user expects of every command: help, exit codes, missing stores.

The command tree is read from the application itself, so a command added
later is walked too.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import typer

from deermem.cli import app, main
from deermem.cli.app import COMMANDS as TABLE
from deermem.cli.app import build_command
from deermem.memory import Memory


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def command_paths() -> Iterator[tuple[str, ...]]:
    """Every command and sub-command of ``deermem``, groups included."""

    def walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        yield path
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk(sub, (*path, name))

    yield from walk(typer.main.get_command(app), ())


COMMANDS = list(command_paths())


def test_the_walk_sees_every_command() -> None:
    names = {" ".join(path) for path in COMMANDS}
    for expected in (
        "",
        "init",
        "facts add",
        "facts list",
        "archive restore",
        "config show",
        "export",
        "import",
        "scopes",
        "reindex",
        "token revoke",
        "eval",
    ):
        assert expected in names


def _listed(help_text: str) -> str:
    """The line a group's help listing shows for a command: its help's first paragraph."""
    return inspect.cleandoc(help_text).split("\n\n")[0].replace("\n", " ").strip()


def test_the_command_table_says_what_each_command_says() -> None:
    """``deermem --help`` lists the table's lines; each must be its command's own."""
    group: Any = typer.main.get_command(app)
    assert list(group.list_commands(None)) == list(TABLE)
    for name, entry in TABLE.items():
        command = build_command(name)
        assert command.name == name
        assert _listed(command.short_help or command.help or "") == entry.help, name


def test_the_help_listing_is_the_one_of_the_loaded_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown = []
    for load in (False, True):
        group: Any = typer.main.get_command(app)
        if load:  # every command built, as when all were registered at start
            for name in TABLE:
                group.commands[name]
        group.get_help(typer.Context(group, info_name="deermem"))
        shown.append(capsys.readouterr().out)
    assert shown[0] == shown[1]
    assert "│ facts " in shown[0]
    assert "│ eval " in shown[0]


@pytest.mark.parametrize(
    ("args", "loaded"),
    [
        (["--help"], []),
        (["facts", "list", "--help"], ["facts"]),
        (["facts", "list"], ["facts"]),
        (["mcp", "--help"], ["service"]),
        (["eval", "--help"], ["eval", "progress"]),
        (["reindex", "--help"], ["progress", "store"]),
    ],
)
def test_a_command_imports_its_own_module_only(
    args: list[str], loaded: list[str], tmp_path: Path
) -> None:
    """Issue 21: start-up pays for the command that runs, not for every command — rich's
    progress display too, which only whole-store work and the evaluation show."""
    Memory.open(tmp_path).create_fact("Uses uv", category="preference")
    script = (
        "import contextlib, io, sys\n"
        "from deermem.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['--root', {str(tmp_path)!r}, *{args!r}])\n"
        "print(sorted(m for m in sys.modules if m.startswith('deermem.cli.')))\n"
        "print('rich.progress' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    expected = sorted(
        ["deermem.cli.app", "deermem.cli.output", *(f"deermem.cli.{m}" for m in loaded)]
    )
    modules, progress = done.stdout.splitlines()
    assert modules == repr(expected)
    assert progress == repr("progress" in loaded)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "deermem")
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_works_everywhere(
    capsys: pytest.CaptureFixture[str], path: tuple[str, ...], flag: str
) -> None:
    code, out, err = run(capsys, *path, flag)
    assert code == 0, err
    assert "Traceback" not in out + err
    assert "sage:" in out  # "Usage:" (typer) or "usage:" (the evaluation's own parser)
    # Flags read as flags: no value type beside them, no --x / --no-x pairs.
    assert "<bool>" not in out
    assert " / --no-" not in out


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "deermem")
def test_a_usage_error_exits_with_2_everywhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, path: tuple[str, ...]
) -> None:
    code, out, err = run(capsys, "--root", str(tmp_path), *path, "--no-such-option")
    assert code == 2, out + err
    assert "Traceback" not in out + err
    assert list(tmp_path.iterdir()) == []  # nothing was written


@pytest.mark.parametrize(
    "args",
    [
        ("facts", "list", "--limit", "-1"),  # out of range
        ("facts", "add"),  # a missing argument
        ("audit", "--limit", "many"),  # not a number
        ("search",),
        ("demo", "--now", "tomorrow"),
        ("facts", "edit", "fact_1"),  # nothing to change
    ],
)
def test_bad_values_and_missing_arguments_are_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...]
) -> None:
    code, out, err = run(capsys, "--root", str(tmp_path), *args)
    assert code == 2, out + err
    assert "Traceback" not in out + err


def test_help_shows_the_true_agent_default(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "-h")
    assert "__default__" in " ".join(out.replace("│", " ").split())


# --- a read command on a store that does not exist -------------------------------------------


READ_COMMANDS: Final = [
    ("facts", "list"),
    ("facts", "show", "fact_1"),
    ("audit",),
    ("why", "fact_1"),
    ("archive", "list"),
    ("context",),
    ("search", "tea"),
    ("export",),
    ("scopes",),
    ("reindex",),
]


@pytest.mark.parametrize("args", READ_COMMANDS)
def test_a_read_command_on_a_missing_root_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...]
) -> None:
    missing = tmp_path / "not-there"
    code, out, err = run(capsys, "--root", str(missing), "--user", "alice", *args)
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1  # one line
    assert f"no store at {missing}" in err
    assert "does not exist" in err
    assert not missing.exists()  # and it was not created


@pytest.mark.parametrize("args", READ_COMMANDS)
def test_a_read_command_on_a_directory_of_other_files_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...]
) -> None:
    """It answered "no matches" (exit 0) and wrote the search index beside the files."""
    (tmp_path / "notes.txt").write_text("mine", "utf-8")
    code, out, err = run(capsys, "--root", str(tmp_path), "--user", "alice", *args)
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert "neither empty nor a deermem store" in err
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("args", [*READ_COMMANDS, ("facts", "add", "Likes tea"), ("init",)])
def test_a_root_that_is_a_link_to_nothing_is_named_with_its_target(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...]
) -> None:
    # An unmounted disk or a moved directory: the reads advised `deermem init`, and init
    # then failed with a bare "File exists".
    root = tmp_path / "root"
    root.symlink_to(tmp_path / "not-mounted-yet")
    code, out, err = run(capsys, "--root", str(root), "--user", "alice", *args)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    said = f"{root}: a symbolic link to {tmp_path / 'not-mounted-yet'}, which does not exist"
    assert said in err.replace(f"no store at {root} (from --root)", str(root))
    assert "init" not in err
    assert sorted(tmp_path.iterdir()) == [root]


def test_a_missing_default_root_names_where_it_came_from(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEERMEM_DATA_DIR", str(tmp_path / "data"))
    code, _, err = run(capsys, "facts", "list")
    assert code == 1
    assert "$DEERMEM_DATA_DIR" in err


def test_a_write_command_refuses_a_root_that_holds_no_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A mistyped --root became a new store on the first write (issue 24, point 10)."""
    root = tmp_path / "new"
    code, _, err = run(capsys, "--root", str(root), "facts", "add", "Likes tea")
    assert code == 1
    assert err.count("\n") == 1
    assert f"no store at {root}" in err
    assert f"deermem --root {root} init" in err
    assert not root.exists()
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text("mine", "utf-8")
    code, _, err = run(capsys, "--root", str(tmp_path / "project"), "facts", "add", "Likes tea")
    assert code == 1
    assert "neither empty nor a deermem store" in err
    assert [p.name for p in (tmp_path / "project").iterdir()] == ["notes.txt"]
    from deermem.config import NOT_STORE_DATA
    from deermem.store.markdown.files import LOCK_FILENAME

    assert LOCK_FILENAME in NOT_STORE_DATA  # one name, read in two layers
    (tmp_path / "empty").mkdir()  # a search leaves the index and the lock; still no store
    assert run(capsys, "--root", str(tmp_path / "empty"), "search", "tea")[0] == 0
    code, _, err = run(capsys, "--root", str(tmp_path / "empty"), "facts", "add", "Likes tea")
    assert code == 1
    assert f"no store at {tmp_path / 'empty'}" in err
    assert run(capsys, "--root", str(root), "init")[0] == 0
    code, _, _ = run(capsys, "--root", str(root), "facts", "add", "Likes tea")
    assert code == 0
    code, out, _ = run(capsys, "--root", str(root), "facts", "list", "--json")
    assert [fact["content"] for fact in json.loads(out)] == ["Likes tea"]


# --- demo --root --------------------------------------------------------------------------


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_demo_refuses_a_directory_that_is_not_empty(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run(capsys, "--root", str(tmp_path), "init")
    run(capsys, "--root", str(tmp_path), "--user", "alice", "facts", "add", "Likes tea")
    before = tree_digest(tmp_path)
    code, _, err = run(capsys, "demo", "--root", str(tmp_path))
    assert code == 2
    assert "is not empty" in " ".join(err.replace("│", " ").split())
    assert tree_digest(tmp_path) == before
    assert not (tmp_path / "users" / "demo").exists()


def test_demo_refuses_even_a_directory_with_one_stray_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("mine", "utf-8")
    code, _, _ = run(capsys, "demo", "--root", str(tmp_path))
    assert code == 2
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


def test_the_demo_store_explains_against_its_own_cap(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = tmp_path / "demo"
    assert run(capsys, "demo", "--root", str(root))[0] == 0
    scope = ("--root", str(root), "--user", "demo", "--agent", "stale-vs-confirmed-hybrid-v1")
    _, out, _ = run(capsys, *scope, "facts", "list", "--json")
    fact_id = json.loads(out)[0]["id"]
    _, out, _ = run(capsys, *scope, "why", fact_id, "--json")
    assert json.loads(out)["standing"]["maxFacts"] == 10


def test_the_demo_store_runs_what_a_new_store_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The demo's store records hybrid-v1 and shadow mode, as every store deermem creates:
    its hybrid-v1 scopes are explained and gated under the policy that built them (it
    recorded only the cap, so every later command ran `confidence`)."""
    root = tmp_path / "demo"
    code, out, _ = run(capsys, "demo", "--root", str(root))
    assert code == 0
    said = " ".join(out.split())
    assert "It runs hybrid-v1 with shadow mode on" in said
    assert "the *-confidence scopes too" in said
    _, out, _ = run(capsys, "--root", str(root), "config", "show", "--json")
    settings = json.loads(out)["settings"]
    assert settings["fact_eviction_policy"]["value"] == "hybrid-v1"
    assert settings["fact_eviction_shadow_enabled"]["value"] is True
    assert settings["max_facts"]["value"] == 10
    for agent in ("stale-vs-confirmed-hybrid-v1", "stale-vs-confirmed-confidence"):
        scope = ("--root", str(root), "--user", "demo", "--agent", agent)
        _, out, _ = run(capsys, *scope, "why", "fact_confirm", "--json")
        assert json.loads(out)["standing"]["policyVersion"] == "hybrid-v1"
        code, _, _ = run(
            capsys, *scope, "facts", "add", "Likes short answers.", "--confidence", "0.8"
        )
        assert code == 0
        _, out, _ = run(capsys, *scope, "audit", "--json")
        newest = json.loads(out)[0]
        assert newest["policyVersion"] == "hybrid-v1"
        assert newest["shadow"]["policyVersion"] == "confidence"


# --- lists: --limit -----------------------------------------------------------------------


@pytest.fixture
def crowded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A store at a cap of 10 with 14 facts added: 10 active, 4 archived, 4 receipts."""
    config = tmp_path / "cap.yaml"
    config.write_text("max_facts: 10\n", "utf-8")
    root = tmp_path / "store"
    assert run(capsys, "--root", str(root), "init", "--config", str(config))[0] == 0
    for number in range(14):
        code, _, _ = run(
            capsys,
            "--root",
            str(root),
            "facts",
            "add",
            f"Fact number {number}",
            "--confidence",
            f"0.{number % 9 + 1}",
        )
        assert code in (0, 1)  # 1: the gate evicted the new fact itself
    return root


@pytest.mark.parametrize(("command", "total"), [("facts", 10), ("archive", 4)])
def test_limit_on_lists(
    capsys: pytest.CaptureFixture[str], crowded: Path, command: str, total: int
) -> None:
    base = ("--root", str(crowded), command, "list")
    _, out, _ = run(capsys, *base, "--json")
    everything = json.loads(out)
    assert len(everything) == total
    _, out, _ = run(capsys, *base, "--limit", "3", "--json")
    assert json.loads(out) == everything[:3]
    _, out, _ = run(capsys, *base, "-n", "0", "--json")
    assert json.loads(out) == everything
    code, out, _ = run(capsys, *base, "--limit", "2")
    assert code == 0
    assert f"of {total}" in out


def test_limit_on_the_audit_keeps_the_newest(
    capsys: pytest.CaptureFixture[str], crowded: Path
) -> None:
    _, out, _ = run(capsys, "--root", str(crowded), "audit", "--limit", "0", "--json")
    everything = json.loads(out)
    assert len(everything) == 4
    # Newest first, as the table and GET …/audit list them.
    moments = [receipt["occurredAt"] for receipt in everything]
    assert moments == sorted(moments, reverse=True)
    _, out, _ = run(capsys, "--root", str(crowded), "audit", "--limit", "2", "--json")
    assert json.loads(out) == everything[:2]


# --- facts add - ----------------------------------------------------------------------------


def with_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_facts_add_reads_the_content_from_stdin(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_stdin(monkeypatch, "Uses uv, not pip — 用 uv 安装\n".encode())
    run(capsys, "--root", str(tmp_path), "init")
    code, out, _ = run(capsys, "--root", str(tmp_path), "facts", "add", "-", "--json")
    assert code == 0
    fact_id = json.loads(out)["factId"]
    _, out, _ = run(capsys, "--root", str(tmp_path), "facts", "show", fact_id, "--json")
    assert json.loads(out)["content"] == "Uses uv, not pip — 用 uv 安装"


def test_facts_add_refuses_stdin_that_is_not_utf8(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_stdin(monkeypatch, b"c\xffat")
    code, out, err = run(capsys, "--root", str(tmp_path), "facts", "add", "-")
    assert code == 1
    assert out == ""
    assert "standard input" in err
    assert "not UTF-8" in err
    assert not tmp_path.joinpath("agents").exists()


# --- the first hour (issue 24) ---------------------------------------------------------------


def test_the_roots_options_work_after_the_command_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`deermem facts list --user alice` said `No such option: --user` (point 4)."""
    root = str(tmp_path / "memory")
    assert main(["--root", root, "init"]) == 0
    assert main(["facts", "add", "Uses uv", "--root", root, "--user", "alice"]) == 0
    capsys.readouterr()
    assert main(["facts", "list", "--json", "--user=alice", "--root", root]) == 0
    [fact] = json.loads(capsys.readouterr().out)
    assert fact["content"] == "Uses uv"
    # an option the command has itself stays the command's
    assert main(["token", "add", "--root", root, "--user", "alice", "--json"]) == 0
    token = json.loads(capsys.readouterr().out)
    assert token["users"] == ["alice"]


def _said(err: str) -> str:
    """An error as one line of words: typer's panel borders and wrapping removed."""
    return " ".join(err.replace("│", " ").split())


@pytest.mark.parametrize("option", ["--root", "--user", "--agent"])
def test_a_root_option_given_before_and_after_the_command_with_two_values_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    """`deermem --user alice facts add ... --user bob` wrote to alice: the later copy,
    moved in front, lost to the first, against click's last-wins rule and unsaid."""
    root = str(tmp_path / "memory")
    assert main(["--root", root, "init"]) == 0
    capsys.readouterr()
    first, later = {"--root": (root, str(tmp_path / "other"))}.get(option, ("alice", "bob"))
    before = [] if option == "--root" else ["--root", root]
    code, out, err = run(
        capsys, *before, option, first, "facts", "add", "meant for the later", option, later
    )
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1  # one line, no traceback
    assert f"{option} given twice with different values: {first!r} before the command, " in err
    assert f"{later!r} after it" in err
    assert main(["--root", root, "scopes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []  # nothing written anywhere
    assert not (tmp_path / "other").exists()


def test_a_root_option_given_twice_with_the_same_value_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(tmp_path / "memory")
    assert main(["--root", root, "init"]) == 0
    capsys.readouterr()
    same = ["--user", "alice", "facts", "add", "Uses uv", "--user=alice", "--root", root + "/"]
    assert main(["--root", root, *same, "--json"]) == 0
    capsys.readouterr()
    assert main(["--root", root, "--user", "alice", "facts", "list", "--json"]) == 0
    [fact] = json.loads(capsys.readouterr().out)
    assert fact["content"] == "Uses uv"


def test_an_agent_given_before_and_after_the_command_in_two_cases_is_one_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """storage.md: `Coder` and `coder` are one agent, so they agree (were "different values")."""
    root = str(tmp_path / "memory")
    assert main(["--root", root, "init"]) == 0
    capsys.readouterr()
    alice = ["--root", root, "--user", "alice"]
    assert main([*alice, "--agent", "Coder", "facts", "add", "Uses uv", "--agent", "coder"]) == 0
    capsys.readouterr()
    assert main([*alice, "--agent", "CODER", "facts", "list", "--json", "--agent=Coder"]) == 0
    [fact] = json.loads(capsys.readouterr().out)
    assert fact["content"] == "Uses uv"
    assert main([*alice, "scopes", "--json"]) == 0
    assert [row["agent"] for row in json.loads(capsys.readouterr().out)] == ["coder"]


def test_an_admin_token_for_named_users_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`token add --admin --user bob` stored an admin token (every user) and dropped bob."""
    root = str(tmp_path / "memory")
    assert main(["--root", root, "init"]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, "--root", root, "token", "add", "--admin", "--user", "bob")
    assert code == 2
    assert out == ""
    assert "--admin and --user bob conflict" in _said(err)
    assert main(["--root", root, "token", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["search", ""], "expected 1 to 1000 characters, got empty"),
        (["search", "x" * 1001], "expected 1 to 1000 characters, got 1001"),
        (["context", "--query", ""], "expected 1 to 1000 characters, got empty"),
        (["search", "   "], "expected words to look for, not only spaces"),
        (["context", "--query", "\t\u3000 "], "expected words to look for, not only spaces"),
        (["search", "uv", "--top-k", "51"], "less than or equal to 50"),
        (["search", "uv", "--category", " "], "expected a category to filter by, not blank"),
    ],
)
def test_search_values_the_http_api_refuses_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    """The CLI answered "no matches" (exit 0) for a query HTTP and MCP refuse with 422."""
    root = str(tmp_path / "memory")
    assert main(["--root", root, "init"]) == 0
    capsys.readouterr()
    assert main(["--root", root, "facts", "add", "Uses uv", "-q"]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, "--root", root, *args)
    assert code == 2
    assert out == ""
    assert says in _said(err)


def test_the_cli_search_bounds_are_the_http_apis() -> None:
    """One constant for each bound: the CLI's, the server's and the tools' cannot drift."""
    from deermem.results import MAX_QUERY_CHARS, MAX_TOP_K
    from deermem.service.settings import ServerLimits, ToolLimits

    assert ServerLimits().max_top_k == ToolLimits().max_top_k == MAX_TOP_K
    assert ToolLimits().max_query_chars == MAX_QUERY_CHARS
    assert main(["search", "x" * MAX_QUERY_CHARS, "--top-k", str(MAX_TOP_K), "-h"]) == 0


def test_rm_purge_and_revoke_print_the_records_of_the_http_api_with_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`facts rm`, `archive purge` and `token revoke` were the writes without `--json`."""
    from deermem.results import Forgotten, Purged, to_json

    root = str(tmp_path / "memory")
    assert main(["--root", root, "init"]) == 0
    capsys.readouterr()
    assert main(["--root", root, "facts", "add", "Uses uv", "-q"]) == 0
    fact_id = capsys.readouterr().out.strip()
    code, out, _ = run(capsys, "--root", root, "facts", "rm", fact_id, "--json")
    assert code == 0
    assert json.loads(out) == to_json(Forgotten(fact_id=fact_id, archived=True))
    assert json.loads(out) == {"factId": fact_id, "archived": True}
    code, out, _ = run(capsys, "--root", root, "archive", "purge", fact_id, "--yes", "--json")
    assert code == 0
    assert json.loads(out) == to_json(Purged(fact_id=fact_id, purged=True))
    assert json.loads(out) == {"factId": fact_id, "purged": True}
    assert main(["--root", root, "token", "add", "--user", "alice", "--name", "laptop"]) == 0
    capsys.readouterr()
    assert main(["--root", root, "token", "list", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    code, out, _ = run(capsys, "--root", root, "token", "revoke", listed["id"], "--json")
    assert code == 0
    assert json.loads(out) == listed
    assert main(["--root", root, "token", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_command_is_built_once_per_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Moving the root's options first looks the command up; the run then uses that
    command, not a second one built for it (issue 23: every command's start-up)."""
    built: list[str] = []

    def counted(name: str) -> Any:
        built.append(name)
        return build_command(name)

    monkeypatch.setattr(sys.modules["deermem.cli.app"], "build_command", counted)
    root = str(tmp_path / "memory")
    assert main(["init", "--root", root]) == 0
    assert main(["facts", "list", "--root", root, "--user", "alice"]) == 0
    assert built == ["init", "facts"]


def test_demo_learn_shows_extraction_confirmation_and_the_gate_without_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ingest` needed a key or a 4–7 minute build to see learning at all (point 6)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["demo", "--learn", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    first, second = (step["report"] for step in document["learning"])
    assert (len(first["added"]), len(first["evicted"])) == (1, 1)  # extracted; the gate made room
    assert first["evicted"][0]["reason"] == "capacity"
    assert second["confirmed"] == first["added"]  # "that's exactly right" confirmed it
    assert main(["demo", "--learn", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == document  # the same every run
    root = tmp_path / "demo"
    assert main(["demo", "--learn", "--root", str(root)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "+ added fact_learn001 correction" in out
    assert "✓ confirmed fact_learn001" in out
    assert "⇣ evicted fact_old00" in out
    memory = Memory.open(root, user="demo", agent="learning")
    assert memory.get_fact("fact_learn001").lastConfirmedAt is not None


def test_no_help_swallows_a_placeholder_in_its_defaults(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve -h` showed `[default: /.server]`: markdown ate `<root>` (point 9)."""
    monkeypatch.setenv("COLUMNS", "400")  # one line per option, nothing wrapped
    for command in (["serve"], ["mcp"], ["token", "add"], ["token", "list"], ["init"]):
        assert main([*command, "-h"]) == 0
        out = capsys.readouterr().out
        assert "[default: /" not in out, command
    assert main(["serve", "-h"]) == 0
    out = capsys.readouterr().out
    assert "[default: <root>/.server;" in out
    assert "[default: <state-dir>/tokens.json]" in out
    # an optional argument in brackets once, as a required one is in braces (point 15)
    for command in (["export"], ["import"]):
        assert main([*command, "-h"]) == 0
        usage = capsys.readouterr().out
        assert "[[FILE]]" not in usage
        assert "[OPTIONS] [FILE]" in usage


def test_small_cuts_of_the_first_hour(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Point 15: "1 facts"; `facts delete` unknown; `rm` without its receipt; the regret header."""
    root = str(tmp_path / "memory")
    assert main(["--root", root, "init"]) == 0
    assert main(["--root", root, "facts", "add", "Uses uv", "--quiet"]) == 0
    fact_id = capsys.readouterr().out.splitlines()[-1]
    assert main(["--root", root, "facts", "list"]) == 0
    assert "1 fact, " in capsys.readouterr().out
    assert main(["--root", root, "facts", "delete", fact_id]) == 0  # the word other tools use
    out = " ".join(capsys.readouterr().out.split())
    assert f"removed {fact_id} to the archive, receipt rcpt_" in out
    assert main(["--root", root, "regret"]) == 0
    out = capsys.readouterr().out
    assert "everything kept" not in out
    assert out.startswith("regret from the first record kept to ")


def test_delete_fact_returns_its_receipt(tmp_path: Path) -> None:
    memory = Memory.open(tmp_path / "memory", user="alice")
    fact_id = memory.create_fact("Uses uv").fact_id
    assert fact_id is not None
    assert str(memory.create_fact("Uses tabs")).startswith("stored as fact_")  # readable
    receipt = memory.delete_fact(fact_id)
    assert receipt.reason == "deleted"
    assert [line.fact_id for line in receipt.evicted] == [fact_id]
    assert memory.audit()[-1] == receipt


def test_an_empty_listing_names_the_agents_that_hold_this_users_facts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The curl example adds under agent `coder`; the CLI lists `__default__`: "0 facts" and no
    hint made the facts seem to vanish (point 14)."""
    root = tmp_path / "memory"
    Memory.open(root, user="alice", agent="coder").create_fact("Prefers uv over pip")
    assert main(["--root", str(root), "--user", "alice", "facts", "list"]) == 0
    captured = capsys.readouterr()
    assert "0 facts" in captured.out
    assert "other agents: coder (choose one with --agent" in " ".join(captured.err.split())
    assert main(["--root", str(root), "--user", "alice", "--agent", "coder", "facts", "list"]) == 0
    assert capsys.readouterr().err == ""
    # A category this agent lacks: "none under this agent" would be false.
    Memory.open(root, user="alice").create_fact("Lives in Lisbon", category="context")
    assert main(["--root", str(root), "--user", "alice", "facts", "list", "-c", "goal"]) == 0
    captured = capsys.readouterr()
    assert "0 facts" in captured.out
    assert captured.err == ""


# --- input files that are not regular files (cli-04) ---------------------------------------------

# Every command that reads a file the user names. A device never ends (/dev/zero ate all memory)
# and a FIFO blocks until a writer comes, so each is refused by its mode before it is read.
FILE_READERS: Final = [
    ("import", "{file}"),
    ("ingest", "{file}"),
    ("token", "add", "--user", "bob", "--tokens-file", "{file}"),
    ("eval", "validate-contracts", "--config", "{file}"),
    ("eval", "validate-contracts", "--official-manifest", "{file}"),
    ("eval", "validate-contracts", "--synthetic-manifest", "{file}"),
    ("eval", "replay", "--quick", "--params", "{file}"),
]


@pytest.mark.parametrize("kind", ["device", "fifo"])
@pytest.mark.parametrize("args", FILE_READERS, ids=lambda args: " ".join(args[:3]))
def test_a_device_or_a_pipe_given_as_a_file_is_refused_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...], kind: str
) -> None:
    root = str(tmp_path / "store")
    assert run(capsys, "--root", root, "init")[0] == 0
    # A link in tmp_path, never /dev/null itself: a command must not write where it reads.
    given = tmp_path / kind
    if kind == "device":
        given.symlink_to("/dev/null")  # read whole it is empty: a parse error, not this one
    else:
        os.mkfifo(given)  # opened without blocking and refused, so no writer is needed
    argv = [part.format(file=given) for part in args]
    code, out, err = run(capsys, "--root", root, "--user", "bob", *argv)
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {given}: ")
    assert err.endswith("not a regular file (a device, a pipe or a socket)\n")
    assert err.count("\n") == 1


def test_running_out_of_memory_is_one_line(tmp_path: Path) -> None:
    # A sparse regular file larger than the memory the process may use: reading it whole
    # fails at once, and the program says so in one line rather than a traceback.
    big = tmp_path / "big.yaml"
    with big.open("wb") as stream:
        stream.truncate(3 << 30)

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    program = [sys.executable, "-m", "deermem", "eval", "validate-contracts", "--config", str(big)]
    done = subprocess.run(
        program, capture_output=True, text=True, timeout=120, preexec_fn=limit_memory, check=False
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("error: out of memory")
    assert done.stderr.count("\n") == 1


# --- closed standard input or output (cli-05) ----------------------------------------------------


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args", [("export", "-"), ("facts", "list", "--json"), ("facts", "list"), ("scopes",)]
)
def test_a_standard_output_that_refuses_the_write_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...]
) -> None:
    """README: exit 1 is one line naming the file; it said `[Errno 28] No space left on device`."""
    root = str(tmp_path / "store")
    assert run(capsys, "--root", root, "init")[0] == 0
    assert run(capsys, "--root", root, "--user", "bob", "facts", "add", "Prefers tea.")[0] == 0
    with Path("/dev/full").open("wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "deermem", "--root", root, "--user", "bob", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr == "error: standard output: No space left on device\n"


@pytest.mark.parametrize(
    ("closed", "args", "named"),
    [
        (0, ("facts", "add", "-"), "standard input"),
        (0, ("import", "-"), "standard input"),
        (1, ("export", "-"), "standard output"),  # exited 0 with the document gone
        (1, ("facts", "list", "--json"), "standard output"),
    ],
)
def test_a_closed_standard_stream_is_one_line_and_status_1(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    closed: int,
    args: tuple[str, ...],
    named: str,
) -> None:
    root = str(tmp_path / "store")
    assert run(capsys, "--root", root, "init")[0] == 0
    assert run(capsys, "--root", root, "--user", "bob", "facts", "add", "Prefers tea.")[0] == 0
    done = subprocess.run(
        [sys.executable, "-m", "deermem", "--root", root, "--user", "bob", *args],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.close(closed),  # what `<&-` and `>&-` do
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == f"error: {named}: closed (the program was started without it)\n"
