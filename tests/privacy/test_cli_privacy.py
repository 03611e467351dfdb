"""``deermem users erase``, ``deermem users export`` + ``import``, ``deermem redact`` (issue 26)."""

from __future__ import annotations

import io
import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deermem import Memory, MemoryConfig
from deermem.cli import main
from deermem.service.http.jobs import Job, JobStore
from deermem.service.tokens import TokenFile
from tests.privacy.fakes import MAKERS
from tests.privacy.stored import files_text


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def no_tty(monkeypatch: pytest.MonkeyPatch, data: bytes = b"") -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def seed(root: Path, user: str) -> None:
    memory = Memory.open(root, MemoryConfig(), user=user)
    for agent in ("coder", "writer"):
        view = memory.scoped(user=user, agent=agent)
        view.create_fact(f"{user} keeps walrus notes for {agent}")
        view.create_fact(f"{user} deploys with pelican for {agent}")
        view.delete_fact(view.list_facts()[0].id)
    memory.close()


def test_erase_refuses_without_yes_off_a_terminal_and_erases_with_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(tmp_path, "ursula-3c9e")
    seed(tmp_path, "victor-7a1b")
    tokens = TokenFile(tmp_path / ".server" / "tokens.json")
    tokens.add(users=["ursula-3c9e"], now=datetime.now(UTC))
    tokens.add(users=["ursula-3c9e", "victor-7a1b"], now=datetime.now(UTC))
    no_tty(monkeypatch)
    code, out, err = run(capsys, "--root", str(tmp_path), "users", "erase", "ursula-3c9e")
    assert code == 1
    assert "--yes" in err
    assert "ursula-3c9e" in files_text(tmp_path)
    code, out, err = run(
        capsys, "--root", str(tmp_path), "users", "erase", "ursula-3c9e", "--yes", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["erased"] is True
    assert result["counts"]["agents"] == 2
    assert result["counts"]["facts"] == 2
    assert result["counts"]["archived"] == 2
    assert result["counts"]["tokensRevoked"] == 1
    assert len(tokens.records()) == 1
    assert "ursula-3c9e" not in files_text(tmp_path)
    assert "victor-7a1b" in files_text(tmp_path)
    # An unknown user: nothing to erase, exit 0, counts 0.
    code, out, _ = run(capsys, "--root", str(tmp_path), "users", "erase", "ursula-3c9e", "--yes")
    assert code == 0
    assert "nothing erased" in out


def test_erase_finds_the_server_state_where_serve_and_token_find_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/server.md keeps the tokens and job records outside the root (DEERMEM_STATE_DIR);
    the erase revokes the user's token and drops their job records there, not in
    ``<root>/.server``; a tokens file of its own (DEERMEM_TOKENS_FILE) is honoured too."""
    root, state = tmp_path / "root", tmp_path / "state"
    seed(root, "ursula-3c9e")
    seed(root, "victor-7a1b")
    monkeypatch.setenv("DEERMEM_STATE_DIR", str(state))
    now = datetime.now(UTC)
    tokens = TokenFile(state / "tokens.json")
    tokens.add(users=["ursula-3c9e"], now=now)
    jobs = JobStore(state / "jobs", retention_seconds=3600)
    for number, user in enumerate(("ursula-3c9e", "victor-7a1b")):
        jobs.save(Job(f"job_{number:032x}", "done", user, "coder", "t1", now.isoformat()))
    code, out, err = run(
        capsys, "--root", str(root), "users", "erase", "ursula-3c9e", "--yes", "--json"
    )
    assert code == 0, err
    counts = json.loads(out)["counts"]
    assert (counts["tokensRevoked"], counts["jobs"]) == (1, 1)
    assert tokens.records() == ()
    assert "ursula-3c9e" not in files_text(state)
    assert "victor-7a1b" in files_text(state)
    assert not (root / ".server").exists()
    # A tokens file of its own, beside a state directory with no jobs.
    separate = TokenFile(tmp_path / "tokens.json")
    separate.add(users=["victor-7a1b"], now=now)
    monkeypatch.setenv("DEERMEM_TOKENS_FILE", str(separate.path))
    code, out, err = run(
        capsys, "--root", str(root), "users", "erase", "victor-7a1b", "--yes", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["counts"]["tokensRevoked"] == 1
    assert separate.records() == ()
    # No server state at all: the erase says it had none to clean.
    monkeypatch.delenv("DEERMEM_STATE_DIR")
    monkeypatch.delenv("DEERMEM_TOKENS_FILE")
    seed(root, "walter-2b8d")
    code, out, err = run(capsys, "--root", str(root), "users", "erase", "walter-2b8d", "--yes")
    assert code == 0, err
    assert "erased user walter-2b8d" in out
    assert "no server state" in err
    assert "tokensRevoked" not in out


def test_a_user_whose_files_cannot_be_read_is_erased_all_the_same(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A hand edit broke a fact file (a key given twice): her right to be erased does not
    # wait for it to be mended.
    memory = Memory.open(tmp_path, MemoryConfig(), user="ursula-3c9e", agent="coder")
    memory.create_fact("ursula keeps bees on the roof")
    memory.create_fact("ursula walks to work")
    [fact_file, *_] = sorted((tmp_path / "users" / "ursula-3c9e").rglob("fact_*.md"))
    text = fact_file.read_text("utf-8")
    fact_file.write_text(text.replace("category:", "category: context\ncategory:", 1), "utf-8")
    code, out, err = run(
        capsys, "--root", str(tmp_path), "users", "erase", "ursula-3c9e", "--yes", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["erased"] is True
    assert result["counts"]["facts"] == 2  # the unreadable one counted as its file
    assert not (tmp_path / "users" / "ursula-3c9e").exists()
    assert "bees" not in files_text(tmp_path)


def test_users_export_then_import_restores_an_erased_user(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "store"
    seed(root, "ursula-3c9e")
    exported = tmp_path / "ursula.json"
    code, _, err = run(capsys, "--root", str(root), "users", "export", "ursula-3c9e", str(exported))
    assert code == 0, err
    document = json.loads(exported.read_text())
    assert document["format"] == "deermem.user-export"
    no_tty(monkeypatch)
    assert run(capsys, "--root", str(root), "users", "erase", "ursula-3c9e", "--yes")[0] == 0
    code, out, err = run(capsys, "--root", str(root), "import", str(exported), "--json")
    assert code == 0, err
    assert json.loads(out)["counts"]["facts"] == 2
    code, again, _ = run(capsys, "--root", str(root), "users", "export", "ursula-3c9e")
    assert {**json.loads(again), "exportedAt": ""} == {**document, "exportedAt": ""}
    code, _, err = run(capsys, "--root", str(root), "import", str(exported))
    assert code != 0
    assert "already holds this user" in err


def test_redact_finds_and_replaces_secrets_stored_before(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rng = random.Random(26)
    fakes = [make(rng) for make in MAKERS.values()]
    unredacted = Memory.open(tmp_path, MemoryConfig(redact_secrets=False), user="wendy-5f2a")
    for fake in fakes:
        unredacted.create_fact(f"the build uses {fake.snippet} now")
    unredacted.search("build")  # the index holds the text too
    unredacted.close()
    code, out, err = run(capsys, "--root", str(tmp_path), "redact", "--dry-run", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert len(report["items"]) == len(fakes)
    assert report["kinds"] == sorted({fake.kind for fake in fakes})
    for fake in fakes:
        assert fake.secret[-12:] not in out
        assert fake.secret[-12:] in files_text(tmp_path)  # a dry run changes nothing
    code, out, err = run(capsys, "--root", str(tmp_path), "redact")
    assert code == 0, err
    text = files_text(tmp_path)
    for fake in fakes:
        assert fake.secret[-12:] not in text, f"a {fake.kind} stays stored"
    code, out, _ = run(capsys, "--root", str(tmp_path), "redact", "--dry-run")
    assert "no secret found" in out


def test_redact_finds_secrets_in_every_key_of_a_summary_section(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The original DeerMem keeps any key in a section, and deermem keeps it too: a
    # secret beside the summary must be found as the import finds it.
    rng = random.Random(41)
    stripe, github = MAKERS["stripe-key"](rng), MAKERS["github-token"](rng)
    memory = Memory.open(tmp_path, MemoryConfig(redact_secrets=False), user="dora-8b1c")
    memory.create_fact("dora uses the staging server")
    memory.close()
    manifest = tmp_path / "users" / "dora-8b1c" / "memory.json"
    document = json.loads(manifest.read_text())
    document["user"]["personalContext"] = {
        "summary": "likes hiking",
        "updatedAt": "",
        "note": f"stripe {stripe.snippet}",
    }
    document["history"]["recentMonths"] = {"summary": [f"token {github.snippet}"]}
    manifest.write_text(json.dumps(document))
    code, out, err = run(capsys, "--root", str(tmp_path), "redact", "--dry-run", "--json")
    assert code == 0, err
    found = {(item["where"], item["id"]): item["kinds"] for item in json.loads(out)["items"]}
    assert found == {
        ("summary", "user.personalContext"): ["stripe-key"],
        ("summary", "history.recentMonths"): ["github-token"],
    }
    code, out, err = run(capsys, "--root", str(tmp_path), "redact")
    assert code == 0, err
    text = files_text(tmp_path)
    assert stripe.secret not in text
    assert github.secret not in text
    kept = json.loads(manifest.read_text())["user"]["personalContext"]
    assert kept["summary"] == "likes hiking"
    assert kept["note"] == "stripe [redacted: stripe-key]"


def test_redact_names_what_it_could_not_read_and_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A user directory whose owner record is damaged cannot be read: its secrets cannot be
    # found, so "no secret found" with status 0 would be a false all-clear.
    secret = "sk-proj-AbCdEf1234567890AbCdEf1234567890AbCdEf12"
    for user in ("ulla-1", "ulla-2"):
        memory = Memory.open(tmp_path, MemoryConfig(redact_secrets=False), user=user)
        memory.create_fact(f"the key is {secret} for now")
        memory.close()
    damaged = tmp_path / "users" / "ulla-2" / ".memory.owner.json"
    assert damaged.is_file()
    damaged.write_text("garbage")
    code, out, err = run(capsys, "--root", str(tmp_path), "redact")
    assert code == 1
    assert "ulla-1" in out  # the readable user was redacted all the same
    assert "not checked:" in err
    assert "ulla-2" in err
    assert secret not in out + err
    code, out, _ = run(capsys, "--root", str(tmp_path), "redact", "--json")
    assert code == 1
    assert json.loads(out)["problems"]


def test_reindex_names_what_it_could_not_read_and_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for user in ("ulla-1", "ulla-2"):
        Memory.open(tmp_path, MemoryConfig(), user=user).create_fact("Uses uv")
    (tmp_path / "users" / "ulla-2" / ".memory.owner.json").write_text("garbage")
    code, out, err = run(capsys, "--root", str(tmp_path), "reindex", "--json")
    assert code == 1
    assert json.loads(out)["scopes"] == 1
    assert "not indexed:" in err
    assert "ulla-2" in err
