"""Entries a model's answer loses to the answer limits are counted, by limit, in the report,
in ``deermem ingest --json`` and in its human output — over real HTTP to a scripted model."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from deermem import Memory
from deermem.cli import main
from deermem.config import load_config
from deermem.learning import answer as limits
from deermem.testing import ScriptedChatServer
from tests.wire_support import (
    CHAT,
    LABELS,
    answer,
    close_memories,  # noqa: F401 (autouse fixture)
    model_settings,
    new_fact,
    open_memory,
    reinforce,
    removal,
    seed,
    stored_fact,
)

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


def over_the_limits() -> str:
    """An answer that runs into five different limits."""
    facts = [new_fact(f"Fact number {i}.") for i in range(limits.MAX_NEW_FACTS + 2)]
    facts[3] = new_fact("x" * (limits.MAX_CONTENT_CHARS + 1))  # a field limit
    facts[4] = new_fact("Has a long category", category="c" * (limits.MAX_CATEGORY_CHARS + 1))
    confirmations = [reinforce("fact_a")] * (limits.MAX_REINFORCEMENTS + 3)
    confirmations[1] = reinforce("f" * (limits.MAX_ID_CHARS + 1))
    summary = {"summary": "s" * (limits.MAX_SUMMARY_CHARS + 1), "shouldUpdate": True, **LABELS}
    return answer(user={"workContext": summary}, newFacts=facts, factsToReinforce=confirmations)


EXPECTED = {
    "newFacts": 2,
    "factsToReinforce": 3,
    "factsToRemove": 0,
    "staleFactsToRemove": 0,
    "staleFactsToExtend": 0,
    "content": 1,
    "category": 1,
    "confidence": 0,
    "sourceError": 0,
    "summary": 1,
    "id": 1,
    "total": 9,
}


def test_the_report_counts_what_each_limit_dropped(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    seed(memory, stored_fact("fact_a"))
    server.enqueue(over_the_limits())
    report = memory.learn("thread-1", CHAT).report
    assert report.outcome == "applied"
    assert len(report.added) == limits.MAX_NEW_FACTS - 2  # the first 50, two of them too long
    assert report.metrics.malformed_new_facts == 2
    assert report.over_limits == limits.OverLimits(
        new_facts=2, reinforcements=3, content=1, category=1, summaries=1, ids=1
    )
    assert report.to_dict()["overLimits"] == EXPECTED
    assert report.counts()["overLimits"] == 9
    assert len(memory.list_facts()) == 1 + limits.MAX_NEW_FACTS - 2


def test_an_answer_refused_whole_still_says_what_the_limits_dropped(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    seed(memory, stored_fact("fact_a"))
    server.enqueue(
        answer(
            newFacts=[new_fact("y" * (limits.MAX_CONTENT_CHARS + 1))],
            factsToRemove=[removal("fact_a")],
        )
    )
    report = memory.learn("thread-1", CHAT).report
    assert report.outcome == "rejected"
    assert report.over_limits == limits.OverLimits(content=1)
    assert [fact.id for fact in memory.list_facts()] == ["fact_a"]  # nothing changed


def test_an_answer_within_the_limits_counts_nothing(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]))
    report = memory.learn("thread-1", CHAT).report
    assert report.over_limits.total == 0
    assert report.to_dict()["overLimits"] == dict.fromkeys(EXPECTED, 0)


# --- deermem ingest ------------------------------------------------------------------------


@pytest.fixture
def cli(tmp_path: Path, server: ScriptedChatServer, capsys: pytest.CaptureFixture[str]) -> Cli:
    """``deermem --root <store> --config <file> --user alice ARGS``, on a store holding fact_a."""
    config = tmp_path / "deermem.yaml"
    config.write_text(yaml.safe_dump({"model": model_settings(server, max_retries=0)}))
    root = tmp_path / "store"
    memory = Memory.open(root, load_config(config), user="alice")
    memory.import_document({"facts": [stored_fact("fact_a")]})
    memory.close()

    def invoke(*args: str) -> tuple[int, str, str]:
        code = main(["--root", str(root), "--config", str(config), "--user", "alice", *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


def chat_file(tmp_path: Path) -> str:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT))
    return str(path)


def test_ingest_json_reports_the_counts_by_limit(
    cli: Cli, tmp_path: Path, server: ScriptedChatServer
) -> None:
    server.enqueue(over_the_limits())
    code, out, err = cli("ingest", chat_file(tmp_path), "--json")
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)["report"]
    assert report["overLimits"] == EXPECTED
    assert report["counts"]["overLimits"] == 9


def test_ingest_says_what_the_limits_dropped(
    cli: Cli, tmp_path: Path, server: ScriptedChatServer
) -> None:
    server.enqueue(over_the_limits(), answer(newFacts=[new_fact("Uses uv.")]))
    code, out, err = cli("ingest", chat_file(tmp_path))
    assert code == 0, err
    line = next(line for line in out.splitlines() if "limits" in line)
    assert line.strip() == (
        "dropped over the answer's limits: 2 newFacts past the first 50, "
        "3 factsToReinforce past the first 100, 1 × content longer than 4,000 characters, "
        "1 × category longer than 64 characters, 1 × summary longer than 8,000 characters, "
        "1 × id longer than 250 characters"
    )
    code, out, _ = cli("ingest", chat_file(tmp_path), "--thread", "other")
    assert code == 0
    assert "limits" not in out
