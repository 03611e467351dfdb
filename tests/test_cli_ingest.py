"""``deermem ingest FILE`` as a user runs it: real HTTP to a scripted server, a real store."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from deermem import Memory
from deermem.cli import main
from deermem.config import load_config
from deermem.testing import Reply, ScriptedChatServer
from tests.wire_support import (
    answer,
    conversation,
    model_settings,
    new_fact,
    reinforce,
    removal,
    stored_fact,
    tree,
)

Cli = Callable[..., tuple[int, str, str]]
EXAMPLE = Path(__file__).parent.parent / "examples" / "conversation.json"


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


@pytest.fixture
def config_file(tmp_path: Path, server: ScriptedChatServer) -> Path:
    path = tmp_path / "deermem.yaml"
    settings = {
        "model": model_settings(server, max_retries=0),
        "fact_eviction_policy": "hybrid-v1",
        "max_facts": 10,
    }
    path.write_text(yaml.safe_dump(settings))
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def cli(root: Path, config_file: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run ``deermem --root <store> --config <file> --user alice ARGS`` (after ``init``)."""
    assert main(["--root", str(root), "init"]) == 0
    capsys.readouterr()

    def invoke(*args: str, config: Path | None = config_file) -> tuple[int, str, str]:
        options = ["--root", str(root), "--user", "alice"]
        if config is not None:
            options += ["--config", str(config)]
        code = main([*options, *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False))
    return path


def seed_store(root: Path, config_file: Path) -> None:
    memory = Memory.open(root, load_config(config_file), user="alice")
    facts = [stored_fact(f"fact_fill{i}", f"Background fact {i}", confidence=0.95)
             for i in range(7)]  # fmt: skip
    facts += [
        stored_fact("fact_format", "Prefers a code example first", confidence=0.7),
        stored_fact("fact_pip", "Installs packages with pip", confidence=0.96),
    ]
    memory.import_document({"facts": facts})


CONFIRMING = {
    "thread_id": "thread-42",
    "messages": conversation(
        "Show me how to read a CSV in Go.",
        "Here is a code example first, then the explanation.",
        "That's exactly right. By the way, I switched from pip to uv last week.",
        "Noted: uv from now on.",
    ),
}


def full_answer() -> str:
    return answer(
        newFacts=[
            new_fact("Uses uv instead of pip.", category="correction", confidence=0.95),
            new_fact("Writes [bold]Go[/bold] services.", confidence=0.9),
        ],
        factsToReinforce=[reinforce("fact_format")],
        factsToRemove=[removal("fact_pip", 0)],
    )


def test_ingest_prints_what_was_added_confirmed_removed_and_evicted(
    cli: Cli, root: Path, config_file: Path, tmp_path: Path, server: ScriptedChatServer
) -> None:
    seed_store(root, config_file)
    server.enqueue(full_answer())
    code, out, err = cli("ingest", str(write(tmp_path / "chat.json", CONFIRMING)))
    assert code == 0, err
    memory = Memory.open(root, load_config(config_file), user="alice")
    receipts = {r.reason: r for r in memory.audit()}
    assert "thread thread-42" in out
    assert "2 added, 1 confirmed, 1 removed, 1 evicted (committed)" in out
    assert "signals: reinforcement" in out
    assert "✓ confirmed fact_format" in out
    assert "Prefers a code example first" in out
    assert "Uses uv instead of pip." in out
    assert "Writes [bold]Go[/bold] services." in out  # markup printed, not interpreted
    assert "- removed   fact_pip" in out
    assert f"(contradiction, receipt {receipts['contradiction'].receipt_id})" in out
    (evicted,) = receipts["capacity"].fact_ids
    assert f"(capacity, receipt {receipts['capacity'].receipt_id})" in out
    assert evicted in out
    assert memory.get_fact("fact_format").confirmationCount == 1


def test_ingest_json_is_the_report_and_the_facts_it_names(
    cli: Cli, root: Path, config_file: Path, tmp_path: Path, server: ScriptedChatServer
) -> None:
    seed_store(root, config_file)
    server.enqueue(full_answer())
    code, out, _ = cli("ingest", str(write(tmp_path / "chat.json", CONFIRMING)), "--json")
    assert code == 0
    data = json.loads(out)
    report = data["report"]
    assert report["outcome"] == "applied"
    assert report["threadId"] == "thread-42"
    assert report["counts"]["added"] == 2
    assert report["confirmed"] == ["fact_format"]
    assert [r["reason"] for r in report["removed"]] == ["contradiction"]
    assert all(r["receiptId"].startswith("rcpt_") for r in report["removed"] + report["evicted"])
    assert "Uses uv" not in json.dumps(report)  # the report holds no content
    assert data["facts"]["fact_format"]["content"] == "Prefers a code example first"


def test_a_dry_run_shows_the_change_set_and_writes_nothing(
    cli: Cli, root: Path, config_file: Path, tmp_path: Path, server: ScriptedChatServer
) -> None:
    seed_store(root, config_file)
    before = tree(root)
    server.enqueue(full_answer())
    code, out, _ = cli("ingest", str(write(tmp_path / "chat.json", CONFIRMING)), "--dry-run")
    assert code == 0
    assert "2 added, 1 confirmed, 1 removed, 1 evicted (dry run, nothing written)" in out
    assert "Uses uv instead of pip." in out
    assert tree(root) == before


def test_the_thread_id_comes_from_the_option_the_file_or_its_name(
    cli: Cli, tmp_path: Path, server: ScriptedChatServer, root: Path, config_file: Path
) -> None:
    plain = write(tmp_path / "monday-chat.json", conversation("I like tea.", "Noted."))
    named = write(tmp_path / "named.json", CONFIRMING)
    server.enqueue(
        *(answer(newFacts=[new_fact(f"Likes tea {i}.")]) for i in range(3))
    )  # fmt: skip
    cli("ingest", str(plain))
    cli("ingest", str(named))
    cli("ingest", str(named), "--thread", "from-option")
    memory = Memory.open(root, load_config(config_file), user="alice")
    threads = sorted(str(f.source.threadId) for f in memory.list_facts())
    assert threads == ["from-option", "monday-chat", "thread-42"]


def test_global_user_and_agent_options_choose_the_memory(
    root: Path, config_file: Path, tmp_path: Path, server: ScriptedChatServer, capsys: Any
) -> None:
    server.enqueue(answer(newFacts=[new_fact("Likes tea.")]))
    chat = write(tmp_path / "c.json", conversation("I like tea.", "Noted."))
    options = ["--root", str(root), "--config", str(config_file), "--user", "bob"]
    assert main(["--root", str(root), "init"]) == 0
    assert main([*options, "--agent", "coder", "ingest", str(chat)]) == 0
    assert "user 'bob', agent 'coder'" in capsys.readouterr().out
    memory = Memory.open(root, load_config(config_file), user="bob", agent="coder")
    assert len(memory.list_facts()) == 1


def test_the_example_conversation_runs(
    cli: Cli, server: ScriptedChatServer, root: Path, config_file: Path
) -> None:
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]))
    code, out, _ = cli("ingest", str(EXAMPLE))
    assert code == 0
    assert "1 added" in out
    prompt = server.requests[0].messages[1]["content"]
    assert "User:" in prompt
    assert "Assistant:" in prompt


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, r"missing\.json: no such file"),
        ('[{"role": "user", "content": "hi"},\n  {"role": }]',
         r"bad\.json \(line 2, column 12\): invalid JSON: Expecting value"),
        ('{"messages": "hi"}', r"bad\.json: expected a list of messages"),
        ('{"thread_id": 7, "messages": []}', r"bad\.json: 'thread_id': expected a string"),
        ('{"thread_id": " ", "messages": []}', r"bad\.json: 'thread_id': expected a thread id"),
        ('{"thread_id": "' + "t" * 257 + '", "messages": []}',
         r"bad\.json: 'thread_id': expected at most 256 characters"),
        ('[{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]',
         r"bad\.json: message 1: field 'role' has value 'robot'"),
    ],
)  # fmt: skip
def test_a_bad_file_is_one_clear_line(
    cli: Cli, tmp_path: Path, content: str | None, expected: str, server: ScriptedChatServer
) -> None:
    path = tmp_path / ("missing.json" if content is None else "bad.json")
    if content is not None:
        path.write_text(content)
    code, out, err = cli("ingest", str(path))
    assert code == 1
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert re.search(expected, err), err
    assert server.requests == []


def test_without_a_model_ingest_says_extraction_is_off(
    cli: Cli, tmp_path: Path, root: Path
) -> None:
    chat = write(tmp_path / "c.json", conversation("I like tea.", "Noted."))
    code, _, err = cli("ingest", str(chat), config=None)
    assert code == 1
    assert "no model is configured, so extraction from conversations is off" in err
    assert not (root / "users").exists()  # nothing written


def test_a_model_error_is_one_line_and_changes_nothing(
    cli: Cli, tmp_path: Path, server: ScriptedChatServer, root: Path, config_file: Path
) -> None:
    seed_store(root, config_file)
    before = tree(root)
    server.enqueue(Reply.error(500, message="overloaded"))
    chat = write(tmp_path / "c.json", conversation("I like tea.", "Noted."))
    code, _, err = cli("ingest", str(chat))
    assert code == 1
    assert err.startswith("error:")
    assert "500" in err
    assert tree(root) == before


def test_ingest_reports_an_answer_without_an_update(
    cli: Cli, tmp_path: Path, server: ScriptedChatServer
) -> None:
    server.enqueue("I would rather not.")
    code, out, _ = cli("ingest", str(write(tmp_path / "c.json", CONFIRMING)))
    assert code == 3
    assert "no update: the model's answer held no memory update" in out
    assert "nothing changed" in out


def test_ingest_help_explains_with_an_example(cli: Cli) -> None:
    code, out, _ = cli("ingest", "--help")
    assert code == 0
    assert "Example:" in out
    assert "--dry-run" in out


# --- bounded cost: what one ingest sends ------------------------------------------------


def test_a_huge_file_sends_only_its_newest_messages_and_says_so(
    cli: Cli, tmp_path: Path, server: ScriptedChatServer
) -> None:
    line = "We tuned the build cache and the linker flags again today. " * 18
    messages = conversation(*(f"{index}: {line}" for index in range(4000)))  # 4.3 MB
    chat = write(tmp_path / "big.json", {"thread_id": "big", "messages": messages})
    assert chat.stat().st_size > 4_000_000
    server.enqueue(answer(newFacts=[new_fact("Tunes build caches.")]), answer())
    code, out, _ = cli("ingest", str(chat))
    assert code == 0
    sent = re.search(
        r"sent the newest (\d+) message\(s\); the ([\d,]+) older one\(s\) were left out "
        r"\(max_conversation_chars = 24,000\)",
        out,
    )
    assert sent is not None, out
    assert int(sent.group(1)) + int(sent.group(2).replace(",", "")) == 4000
    assert len(server.requests[0].body) < 48_000  # the file is 90 times larger
    code, out, _ = cli("ingest", str(chat), "--thread", "again", "--json")
    assert code == 0
    report = json.loads(out)["report"]
    assert report["messagesSent"] == int(sent.group(1))
    assert report["messagesLeftOut"] == 4000 - report["messagesSent"]
    assert len(server.requests[1].body) < 48_000


def test_a_file_within_the_cap_reports_no_messages_left_out(
    cli: Cli, tmp_path: Path, server: ScriptedChatServer
) -> None:
    server.enqueue(answer(), answer())
    chat = write(tmp_path / "c.json", CONFIRMING)
    code, out, _ = cli("ingest", str(chat))
    assert code == 0
    assert "left out" not in out
    code, out, _ = cli("ingest", str(chat), "--thread", "t2", "--json")
    report = json.loads(out)["report"]
    assert (report["messagesSent"], report["messagesLeftOut"]) == (4, 0)


# --- exit status: an unusable answer is 3 -----------------------------------------------

UNUSABLE = [
    pytest.param("Sorry, I cannot help with that.", "held no memory update", id="garbage"),
    pytest.param('{"newFacts": [{"content": "x"}]}', "held no memory update", id="not-an-update"),
    pytest.param("", "the model's answer was empty", id="empty"),
    pytest.param(
        Reply.text('{"user": {}, "history": {}, "newFacts": [{"content": "Uses u',
                   finish_reason="length"),
        "cut off at the token limit",
        id="cut-off",
    ),
    pytest.param(
        answer(newFacts=[{"content": "no confidence"}], factsToRemove=[removal("fact_pip")]),
        "refused whole",
        id="refused-whole",
    ),
    pytest.param(
        answer(user="alice", history=5, newFacts="none"),
        "refused whole (none of user, history, newFacts and the other lists has the right type)",
        id="wrong-field-types",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("reply", "says"), UNUSABLE)
def test_an_unusable_answer_exits_3_and_changes_nothing(
    cli: Cli,
    root: Path,
    config_file: Path,
    tmp_path: Path,
    server: ScriptedChatServer,
    reply: Reply | str,
    says: str,
) -> None:
    seed_store(root, config_file)
    before = tree(root)
    chat = write(tmp_path / "c.json", CONFIRMING)
    server.enqueue(reply)
    code, out, err = cli("ingest", str(chat))
    assert code == 3, (out, err)
    assert says in out
    assert "nothing changed" in out
    assert tree(root) == before
    server.enqueue(reply)
    code, out, _ = cli("ingest", str(chat), "--json")
    assert code == 3
    report = json.loads(out)["report"]
    assert report["outcome"] in ("no-update", "rejected")
    assert tree(root) == before  # nothing written, so the same file can be retried
    assert len(server.requests) == 2


def test_a_cut_off_answer_that_still_holds_the_update_is_usable(
    cli: Cli, tmp_path: Path, server: ScriptedChatServer
) -> None:
    server.enqueue(
        Reply.text(answer(newFacts=[new_fact("Uses uv.")]) + " and then", finish_reason="length")
    )
    code, out, _ = cli("ingest", str(write(tmp_path / "c.json", CONFIRMING)))
    assert code == 0
    assert "1 added" in out
    assert "cut off at the token limit" in out


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("ingest",), 2),  # no FILE: a usage error
        (("ingest", "chat.json", "--no-such-option"), 2),
        (("ingest", "missing.json"), 1),  # an error
        # A thread id every interface refuses, never read as "not given"
        (("ingest", "chat.json", "--thread", ""), 2),
        (("ingest", "chat.json", "--thread", "  "), 2),
        (("ingest", "chat.json", "--thread", "t" * 257), 2),
    ],
)
def test_usage_errors_are_2_and_other_errors_1(
    cli: Cli, args: tuple[str, ...], code: int, server: ScriptedChatServer
) -> None:
    assert cli(*args)[0] == code
    assert server.requests == []


def test_a_failed_model_call_is_1_not_3(
    cli: Cli, tmp_path: Path, server: ScriptedChatServer
) -> None:
    server.enqueue(Reply.raw(b"<html>not a completion</html>", content_type="text/html"))
    code, _, err = cli("ingest", str(write(tmp_path / "c.json", CONFIRMING)))
    assert code == 1
    assert err.startswith("error:")


def test_ingest_help_lists_the_exit_statuses(cli: Cli) -> None:
    code, out, _ = cli("ingest", "--help")
    assert code == 0
    text = " ".join(out.split())
    for status in ("0: the update ran", "1: an error", "2: a usage error",
                   "3: the model answered, but its answer was unusable"):  # fmt: skip
        assert status in text


def test_ingesting_a_conversation_twice_extracts_and_confirms_it_once(
    root: Path, config_file: Path, tmp_path: Path, server: ScriptedChatServer
) -> None:
    """Two `deermem ingest` processes: the second finds the mark the first committed."""
    seed_store(root, config_file)
    chat = write(tmp_path / "chat.json", CONFIRMING)
    command = [sys.executable, "-m", "deermem", "--root", str(root), "--config", str(config_file)]
    command += ["--user", "alice", "ingest", str(chat)]
    server.enqueue(full_answer(), full_answer())
    first = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "1 confirmed" in first.stdout
    second = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert "every message was already extracted; no model call" in second.stdout
    assert len(server.requests) == 1
    memory = Memory.open(root, load_config(config_file), user="alice")
    assert memory.get_fact("fact_format").confirmationCount == 1


def test_ingest_says_what_it_redacted_never_the_secret(
    cli: Cli, tmp_path: Path, server: ScriptedChatServer
) -> None:
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
    server.enqueue(answer(newFacts=[new_fact(f"Deploys with the key {key}.", confidence=0.9)]))
    chat = {
        "thread_id": "thread-7",
        "messages": conversation(f"My key is {key}, deploy with it.", "Noted."),
    }
    code, out, err = cli("ingest", str(write(tmp_path / "chat.json", chat)))
    assert code == 0, err
    assert "secrets redacted before the model saw them or anything was written: openai-key" in (
        " ".join(out.split())
    )
    assert key not in out + err
