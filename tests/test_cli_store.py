"""The store commands as a user runs them: output, exit codes and the files written."""

from __future__ import annotations

import io
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from deermem.cli import main
from deermem.store.records import margin_words


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run ``deermem --root <tmp> --user alice ARGS`` on a store made by ``deermem init``."""
    assert run(capsys, "--root", str(tmp_path), "init")[0] == 0

    def invoke(*args: str, user: str = "alice") -> tuple[int, str, str]:
        return run(capsys, "--root", str(tmp_path), "--user", user, *args)

    return invoke


def add(cli: Cli, content: str, *options: str) -> str:
    code, out, _ = cli("facts", "add", content, *options, "--json")
    assert code == 0
    fact_id = json.loads(out)["factId"]
    assert isinstance(fact_id, str)
    return fact_id


def test_facts_add_list_show_edit(cli: Cli, tmp_path: Path) -> None:
    code, out, _ = cli(
        "facts", "add", "Prefers uv over pip", "-c", "correction", "--confidence", "0.9"
    )
    assert code == 0
    assert out.startswith("added fact_")
    fact_id = out.split()[1]
    assert list(tmp_path.glob(f"users/alice/agents/__default__/facts/*/{fact_id}.md"))
    code, out, _ = cli("facts", "list", "--json")
    [listed] = json.loads(out)
    assert (listed["id"], listed["category"], listed["confidence"]) == (fact_id, "correction", 0.9)
    code, out, _ = cli("facts", "list")
    assert "Prefers uv over pip" in out
    assert "1 fact, " in out  # not "1 facts" (issue 24, point 15)
    code, out, _ = cli("facts", "show", fact_id, "--json")
    assert json.loads(out)["content"] == "Prefers uv over pip"
    code, out, _ = cli("facts", "edit", fact_id, "--confidence", "0.95", "--revision", "1")
    assert (code, out.strip()) == (0, f"updated {fact_id} (revision 2)")
    code, _, err = cli("facts", "edit", fact_id, "--content", "x", "--revision", "1")
    assert code == 1
    assert "changed concurrently" in err
    assert err.count("\n") == 1
    code, _, err = cli("facts", "edit", fact_id)
    assert code == 2
    assert "at least one" in err


def test_user_text_is_printed_literally(cli: Cli) -> None:
    fact_id = add(cli, "Use [bold]markup[/bold] literally")
    _, out, _ = cli("facts", "list")
    assert "[bold]markup[/bold]" in out
    _, out, _ = cli("facts", "show", fact_id)
    assert "[bold]markup[/bold]" in out


def test_an_add_evicted_at_once_exits_with_status_1(
    cli: Cli, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # beside the store, not in it: a write never makes a store among other files
    config = tmp_path_factory.mktemp("config") / "deermem.toml"
    config.write_text("max_facts = 10\n", "utf-8")
    for number in range(10):
        code, _, _ = cli(
            "--config", str(config), "facts", "add", f"Fact {number}", "--confidence", "0.9"
        )
        assert code == 0
    code, _, err = cli(
        "--config", str(config), "facts", "add", "A weak guess", "--confidence", "0.1"
    )
    assert code == 1
    assert "not kept" in err
    assert f"--config {config} --user alice why fact_" in err
    code, out, _ = cli(
        "--config", str(config), "facts", "add", "A strong fact", "--confidence", "0.95"
    )
    assert code == 0
    assert "evicted fact_" in out
    _, out, _ = cli("facts", "list", "--json")
    assert len(json.loads(out)) == 10


def test_why_says_a_tie_is_a_tie_not_0_below(
    cli: Cli, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Under confidence, facts added without one all score 0.5: the eleventh ties the lowest
    # kept and the tie keeps the fact that came first, which "0.0000 below" would hide.
    config = tmp_path_factory.mktemp("config") / "deermem.toml"
    config.write_text('max_facts = 10\nfact_eviction_policy = "confidence"\n', "utf-8")
    for number in range(11):
        cli("--config", str(config), "facts", "add", f"Fact {number}")
    _, out, _ = cli("--config", str(config), "audit", "--json")
    [line] = json.loads(out)[-1]["evicted"]
    assert line["margin"] == 0.0
    code, out, _ = cli("--config", str(config), "why", line["factId"])
    assert code == 0
    assert "tied with the lowest kept (a tie keeps the fact that came first)" in out
    assert "below" not in out


def test_why_says_a_reserved_correction_took_the_slot_of_a_fact_it_tied(
    cli: Cli, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Under hybrid-v1 a context fact and a correction of the same confidence and age tie;
    # the context fact came first (rank 10 of 11, within the cap of 10) and the reserve
    # took its slot. The receipt said "a tie keeps the fact that came first": the
    # opposite of what happened.
    folder = tmp_path_factory.mktemp("config")
    config = folder / "deermem.toml"
    config.write_text('max_facts = 10\nfact_eviction_policy = "hybrid-v1"\n', "utf-8")
    stamp = "2026-08-01T00:00:00Z"
    facts = [
        {"id": f"fact_bg{n:02d}", "content": f"Background {n}", "confidence": 0.9} for n in range(9)
    ]
    facts.append({"id": "fact_plain", "content": "Plain context", "confidence": 0.5})
    facts.append(
        {"id": "fact_fix", "content": "Use uv", "category": "correction", "confidence": 0.5}
    )
    document = folder / "memory.json"
    document.write_text(json.dumps({"facts": [{**f, "createdAt": stamp} for f in facts]}))
    assert cli("--config", str(config), "import", str(document))[0] == 0
    _, out, _ = cli("--config", str(config), "audit", "--json")
    [line] = json.loads(out)[-1]["evicted"]
    assert (line["factId"], line["rank"], line["margin"]) == ("fact_plain", 10, 0.0)
    code, out, _ = cli("--config", str(config), "why", "fact_plain")
    assert code == 0
    assert "tied with the lowest kept (a reserved correction held its slot)" in " ".join(
        out.split()
    )
    assert "came first" not in out


@pytest.mark.parametrize(
    ("margin", "words"),
    [
        (0.2, "0.2000 below the lowest kept"),
        (1e-8, "less than 0.0001 below the lowest kept"),  # hybrid-v1 between equal facts
        (0.0, "tied with the lowest kept (a tie keeps the fact that came first)"),
        (-1e-8, "less than 0.0001 above the lowest kept (a reserved correction held its slot)"),
        (-0.1379, "0.1379 above the lowest kept (a reserved correction held its slot)"),
        (None, None),
    ],
)
def test_a_margin_has_one_wording_true_to_its_sign(margin: float | None, words: str | None) -> None:
    assert margin_words(margin) == words


def test_a_tie_is_said_with_what_its_receipt_tells() -> None:
    held = "tied with the lowest kept (a reserved correction held its slot)"
    assert margin_words(0.0, rank=10, max_facts=10, reserved=1) == held
    # Beyond the cap, with slots reserved, the lowest kept may be a later correction.
    assert margin_words(0.0, rank=11, max_facts=10, reserved=1) == "tied with the lowest kept"
    by_order = "tied with the lowest kept (a tie keeps the fact that came first)"
    assert margin_words(0.0, rank=11, max_facts=10, reserved=0) == by_order


def test_rm_audit_why_and_the_archive(cli: Cli) -> None:
    fact_id = add(cli, "Lives in Lisbon", "-c", "identity")
    code, out, _ = cli("facts", "rm", fact_id)
    assert code == 0
    assert f"--user alice archive restore {fact_id}`" in out
    code, out, _ = cli("audit", "--json")
    [receipt] = json.loads(out)
    assert (receipt["reason"], receipt["trigger"]) == ("deleted", "manual")
    assert "Lisbon" not in out
    code, out, _ = cli("audit")
    assert "deleted" in out
    assert fact_id in out
    code, out, _ = cli("why", fact_id)
    assert f"{fact_id} is archived" in out
    assert "deleted on" in out
    code, out, _ = cli("archive", "list", "--json")
    assert json.loads(out)[0]["fact"]["content"] == "Lives in Lisbon"
    code, out, _ = cli("archive", "restore", fact_id)
    assert (code, out.strip()) == (0, f"restored {fact_id}")
    code, out, _ = cli("why", fact_id, "--json")
    assert json.loads(out)["status"] == "active"
    cli("facts", "rm", fact_id)
    code, out, _ = cli("archive", "purge", fact_id, "--yes")
    assert (code, out.strip()) == (0, f"purged {fact_id}")
    code, out, _ = cli("why", fact_id)
    assert f"{fact_id} is gone" in out
    code, _, err = cli("archive", "purge", fact_id, "--yes")
    assert code == 1
    assert "in the archive" in err


class Terminal(io.StringIO):
    """A standard input a person types the answers into."""

    def isatty(self) -> bool:
        return True


def test_purge_asks_before_deleting(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    fact_id = add(cli, "Temporary")
    cli("facts", "rm", fact_id)
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, _, _ = cli("archive", "purge", fact_id)
    assert code == 1
    code, out, _ = cli("archive", "list", "--json")
    assert len(json.loads(out)) == 1


def test_purge_asks_on_stderr_and_off_a_terminal_needs_yes(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The question went to standard output, before the JSON (`purge ID --json > f` wrote it
    into f, where nobody saw it), and off a terminal it read its answer from the pipe, as
    `users erase` refuses to."""
    fact_id = add(cli, "Temporary")
    cli("facts", "rm", fact_id)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    code, out, err = cli("archive", "purge", fact_id, "--json")
    assert (code, out) == (1, "")
    assert "confirm with --yes" in err
    assert len(json.loads(cli("archive", "list", "--json")[1])) == 1
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    code, out, err = cli("archive", "purge", fact_id, "--json")
    assert code == 0
    assert json.loads(out) == {"factId": fact_id, "purged": True}
    assert err.startswith(f"Delete the archived fact {fact_id} for good?")
    assert json.loads(cli("archive", "list", "--json")[1]) == []


def test_users_erase_asks_on_stderr(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    add(cli, "Temporary")
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, out, err = cli("users", "erase", "alice", "--json")
    assert (code, out) == (1, "")
    assert "Erase user 'alice'" in err
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    code, out, err = cli("users", "erase", "alice", "--json")
    assert code == 0
    assert json.loads(out)["counts"]["facts"] == 1


def test_users_and_agents_are_separate(cli: Cli, tmp_path: Path) -> None:
    add(cli, "Alice's fact")
    _, out, _ = cli("facts", "list", "--json", user="bob")
    assert json.loads(out) == []
    _, out, _ = cli("--agent", "Coder", "facts", "list", "--json")
    assert json.loads(out) == []
    code, _, _ = cli("--agent", "coder", "facts", "add", "Coder's fact")
    assert code == 0
    assert list(tmp_path.glob("users/alice/agents/coder/facts/*/*.md"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--agent", "../x", "facts", "list"), "agent name '../x' is not allowed"),
        (("facts", "show", "fact_missing"), "no fact 'fact_missing'"),
        (("why", "fact_missing"), "no fact 'fact_missing'"),
        (("archive", "restore", "fact_missing"), "in the archive"),
        (("facts", "add", "  "), "not blank"),
        (("facts", "add", "x", "--confidence", "2"), "between 0 and 1"),
    ],
)
def test_errors_are_one_clear_line(cli: Cli, args: tuple[str, ...], message: str) -> None:
    code, _, err = cli(*args)
    assert code == 1
    assert message in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_a_corrupt_store_is_reported_with_the_file(cli: Cli, tmp_path: Path) -> None:
    add(cli, "Something")
    manifest = tmp_path / "users/alice/memory.json"
    manifest.write_text("[]", "utf-8")
    code, _, err = cli("facts", "list")
    assert code == 1
    assert str(manifest) in err
    assert "expected a JSON object" in err
    assert manifest.read_text("utf-8") == "[]"


def test_a_fact_file_replaced_by_a_directory_is_one_line_naming_it(
    cli: Cli, tmp_path: Path
) -> None:
    fact_id = add(cli, "Something")
    (path,) = tmp_path.rglob(f"{fact_id}.md")
    path.unlink()
    path.mkdir()
    code, _, err = cli("facts", "list")
    assert code == 1
    assert f"{path}: is a directory where a file belongs" in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "command",
    [
        ("facts", "add"),
        ("facts", "list"),
        ("facts", "show"),
        ("facts", "edit"),
        ("facts", "rm"),
        ("audit",),
        ("why",),
        ("archive", "list"),
        ("archive", "restore"),
        ("archive", "purge"),
        ("config", "check"),
        ("demo",),
    ],
)
def test_every_command_explains_itself_with_an_example(
    capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    code, out, _ = run(capsys, *command, "--help")
    assert code == 0
    assert "Example" in out


def test_the_root_help_lists_the_global_options(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "--help")
    for option in ("--root", "--config", "--user", "--agent"):
        assert option in out
    for command in ("facts", "audit", "why", "archive", "config", "demo"):
        assert command in out


def test_a_file_system_error_is_one_line_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", "utf-8")
    code, _, err = run(capsys, "--root", str(blocker / "store"), "facts", "add", "Hello")
    assert code == 1
    assert "a-file" in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def without_the_postgres_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the ``postgres`` extra (psycopg) were not installed."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    for name in [name for name in sys.modules if name.startswith("deermem.store.postgres")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize(
    "args",
    [
        ("db", "status"),
        ("db", "status", "--database", "postgresql://x@127.0.0.1:1/db"),
        ("db", "upgrade", "--database", "postgresql://x@127.0.0.1:1/db"),
    ],
)
def test_db_without_the_postgres_extra_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    without_the_postgres_extra(monkeypatch)
    code, _, err = run(capsys, *args)
    assert code == 1
    assert "PostgreSQL needs the postgres extra (uv sync --extra postgres)" in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


OPENAI_KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
GITHUB_TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
REDACTED_NOTE = "secrets redacted before writing: "


def test_facts_add_and_edit_say_what_they_redacted_never_the_secret(cli: Cli) -> None:
    code, out, err = cli("facts", "add", f"My key is {OPENAI_KEY}")
    assert code == 0, err
    assert f"{REDACTED_NOTE}openai-key (stored as [redacted: KIND]" in out
    assert OPENAI_KEY not in out + err
    code, out, err = cli("facts", "add", f"Also {GITHUB_TOKEN}", "--quiet")
    assert code == 0, err
    fact_id = out.strip()  # --quiet: only the id on stdout, the note on stderr
    assert fact_id.startswith("fact_")
    assert f"{REDACTED_NOTE}github-token" in err
    code, out, _ = cli("facts", "edit", fact_id, "--content", f"Now {OPENAI_KEY}")
    assert code == 0
    assert f"{REDACTED_NOTE}openai-key" in out
    assert OPENAI_KEY not in out
    code, out, _ = cli("facts", "edit", fact_id, "--confidence", "0.9")
    assert code == 0
    assert REDACTED_NOTE not in out  # nothing was redacted this time
    code, out, _ = cli("facts", "add", "A plain fact")
    assert REDACTED_NOTE not in out
    code, out, _ = cli("facts", "add", f"Key {OPENAI_KEY} again", "--json")
    assert json.loads(out)["redacted"] == ["openai-key"]  # the JSON said it already


def test_import_says_what_it_redacted(cli: Cli, tmp_path: Path) -> None:
    add(cli, "Something plain")
    code, out, _ = cli("export")
    document = json.loads(out)
    document["facts"][0]["content"] = f"The deploy key is {GITHUB_TOKEN}"
    path = tmp_path.parent / f"{tmp_path.name}-doc.json"
    path.write_text(json.dumps(document), "utf-8")
    code, out, err = cli("import", str(path))
    assert code == 0, err
    assert "imported into" in out
    assert f"{REDACTED_NOTE}github-token" in out
    assert GITHUB_TOKEN not in out + err


def hint_in(text: str) -> list[str]:
    """The words of the last `deermem ...` hint in ``text``, as a shell would split them."""
    hint = text.rsplit("`deermem ", 1)[1].split("`", 1)[0]
    return shlex.split(hint)


def test_hints_run_as_printed_on_the_same_memory(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """The undo and why hints carry --root, --config, --user and --agent, quoted for a shell."""
    root = tmp_path_factory.mktemp("hints") / "my store"
    config = tmp_path_factory.mktemp("config") / "cap 10.toml"
    config.write_text("max_facts = 10\n", "utf-8")
    assert run(capsys, "--root", str(root), "init")[0] == 0
    scope = ["--root", str(root), "--config", str(config), "--user", "al'ice", "--agent", "coder"]
    code, out, _ = run(capsys, *scope, "facts", "add", "Lives in Lisbon", "-q")
    fact_id = out.strip()
    code, out, _ = run(capsys, *scope, "facts", "rm", fact_id)
    assert code == 0
    undo = hint_in(out)
    assert undo == [*scope, "archive", "restore", fact_id]
    code, out, _ = run(capsys, *undo)
    assert (code, out.strip()) == (0, f"restored {fact_id}")
    for number in range(9):
        run(capsys, *scope, "facts", "add", f"Strong fact {number}", "--confidence", "0.9")
    code, _, err = run(capsys, *scope, "facts", "add", "A weak guess", "--confidence", "0.1")
    assert code == 1
    why = hint_in(" ".join(err.split()))
    assert why[:-1] == [*scope, "why"]
    code, out, _ = run(capsys, *why)
    assert code == 0
    assert f"{why[-1]} is archived" in out
    assert hint_in(out) == [*scope, "archive", "restore", why[-1]]
