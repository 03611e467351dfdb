"""`deermem context` and `deermem search` as a user runs them: output, exit codes, files."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from deermem.cli import main

from .context_support import files_state, open_memory, seed_document, usage_file

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run ``deermem --root <tmp> --user alice --agent coder [--config FILE] ARGS``."""

    def invoke(*args: str, config: str | None = None) -> tuple[int, str, str]:
        options = ["--root", str(tmp_path), "--user", "alice", "--agent", "coder"]
        if config is not None:
            path = tmp_path / "deermem.toml"
            path.write_text(config, "utf-8")
            options += ["--config", str(path)]
        code = main([*options, *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


TIGHT = "max_injection_tokens = 100\nguaranteed_token_budget = 50\n"


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    # the original's policy, which a store that recorded none keeps (a new one runs hybrid-v1)
    memory = open_memory(
        tmp_path, fact_eviction_policy="confidence", fact_eviction_shadow_enabled=False
    )
    memory.import_document(seed_document())
    return tmp_path


# --- deermem context -------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["confidence", "hybrid-v1"])
def test_context_keeps_the_correction_under_a_tight_budget(
    cli: Cli, seeded: Path, policy: str
) -> None:
    code, out, err = cli("context", config=f'{TIGHT}fact_eviction_policy = "{policy}"\n')
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:2] == ["<memory>", "Facts:"]
    assert lines[2].startswith("- [correction | 0.70] Don't use pip in this project; use uv.")
    assert lines[-1] == "</memory>"
    assert len(lines) < 3 + 11  # the budget left preferences out, never the correction


def test_context_for_a_question_prefers_its_fact_within_the_budget(cli: Cli, seeded: Path) -> None:
    code, plain, _ = cli("context", config=TIGHT)
    assert code == 0
    assert "pathlib" not in plain  # over the budget without a question
    code, asked, err = cli("context", "--query", "pathlib or os.path?", config=TIGHT)
    assert (code, err) == (0, "")
    assert "The user prefers pathlib over os.path." in asked
    assert asked.splitlines()[2].startswith("- [correction")  # the guaranteed pool first
    assert len(asked.splitlines()) == len(plain.splitlines())


def test_a_question_runs_a_search_only_when_not_every_fact_fits(cli: Cli, seeded: Path) -> None:
    """The search only orders what is left out; with room for every fact its result could
    not change the text, so it never runs (no search index is even opened)."""
    index = seeded / ".retrieval"
    code, plain, _ = cli("context")
    code, asked, err = cli("context", "--query", "pathlib or os.path?")
    assert (code, err) == (0, "")
    assert asked == plain
    assert "The user prefers pathlib over os.path." in asked
    assert not index.exists()
    code, _, err = cli("context", "--query", "pathlib or os.path?", config=TIGHT)
    assert (code, err) == (0, "")
    assert index.is_dir()  # over the budget: the search ran


def test_context_explain_lists_what_went_in_and_why_the_rest_did_not(
    cli: Cli, seeded: Path
) -> None:
    code, out, _ = cli("context", "--explain", config=TIGHT)
    assert code == 0
    assert re.match(r"\d+ of 100 tokens \(summaries 0, guaranteed \d+ of 50", out)
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip().startswith("fact_")}
    assert "Facts, guaranteed" in rows["fact_correct"]
    statuses = [row.split()[-1] for row in rows.values()]
    assert statuses.count("over-budget") == 1
    assert "after-stop" in statuses
    assert "its line did not fit in the tokens left in its pool" in " ".join(out.split())
    for fact in seed_document()["facts"]:
        assert fact["content"] not in out  # the manifest holds no content


def test_context_explain_shows_the_summaries_row(cli: Cli, tmp_path: Path) -> None:
    document = seed_document()
    document["user"] = {"workContext": {"summary": "Backend engineer"}}
    open_memory(tmp_path).import_document(document)
    code, out, _ = cli("context", "--explain")
    assert code == 0
    summary_row = next(line for line in out.splitlines() if "(summaries)" in line)
    assert "User Context" in summary_row
    assert "Backend engineer" not in out


def test_context_json_has_text_block_and_manifest(cli: Cli, seeded: Path) -> None:
    code, out, _ = cli("context", "--json", config=TIGHT)
    assert code == 0
    data = json.loads(out)
    assert data["block"] == f"<memory>\n{data['text']}\n</memory>"
    manifest = data["manifest"]
    assert manifest["injected"][0]["factId"] == "fact_correct"
    assert manifest["injected"][0]["pool"] == "guaranteed"
    assert {"omitted", "budgetTokens", "maxTokens", "guaranteedTokenBudget"} <= set(manifest)
    code, again, _ = cli("context", "--explain", "--json", config=TIGHT)
    assert again == out  # byte-identical across runs


def test_context_of_an_empty_or_disabled_memory(cli: Cli, seeded: Path) -> None:
    code, out, err = cli("--agent", "writer", "context")
    assert (code, out) == (0, "")
    assert "nothing to inject: memory is empty" in err
    code, out, err = cli("context", config="injection_enabled = false\n")
    assert (code, out) == (0, "")
    assert "injection is off" in err
    code, out, _ = cli("context", "--explain", config="injection_enabled = false\n")
    assert "injection is off" in out


def test_context_writes_nothing(cli: Cli, seeded: Path) -> None:
    before = files_state(seeded)
    cli("context", "--explain", config='fact_eviction_policy = "hybrid-v1"\n')
    cli("context", config='fact_eviction_policy = "hybrid-v1"\n')
    assert files_state(seeded) == {**before, "deermem.toml": files_state(seeded)["deermem.toml"]}


# --- deermem search --------------------------------------------------------------------------


def test_search_table_and_json(cli: Cli, seeded: Path) -> None:
    code, out, _ = cli("search", "pip uv")
    assert code == 0
    first = next(line for line in out.splitlines() if line.strip().startswith("1 "))
    assert "fact_correct" in first
    assert "correction" in first
    assert "hybrid" in first  # keyword and meaning: the default when the models run
    code, out, _ = cli("search", "pytest unittest", "--top-k", "2", "--json")
    results = json.loads(out)
    assert len(results) <= 2
    assert results[0]["fact"]["id"] == "fact_pref02"
    assert results[0]["matchType"] == "hybrid"
    assert set(results[0]) == {"fact", "score", "matchType", "bm25"}


def test_search_category_and_fallback(cli: Cli, seeded: Path) -> None:
    code, out, _ = cli("search", "the project", "--category", "correction", "--json")
    assert [r["fact"]["id"] for r in json.loads(out)] == ["fact_correct"]
    code, out, _ = cli("search", "athlib", "--json")  # inside "pathlib": substrings
    [hit] = json.loads(out)
    assert (hit["fact"]["id"], hit["matchType"], hit["bm25"]) == ("fact_pref07", "substring", None)
    code, out, _ = cli("search", "zebra-xylophone")
    assert (code, out.strip()) == (0, "no matches")


def test_search_records_recalls_under_hybrid_v1_unless_told_not_to(cli: Cli, seeded: Path) -> None:
    hybrid = 'fact_eviction_policy = "hybrid-v1"\nsearch_mode = "keyword"\n'
    cli("search", "pathlib", "--no-record", config=hybrid)
    assert not usage_file(seeded).exists()
    cli("search", "pathlib")  # confidence: recalls are not recorded
    assert not usage_file(seeded).exists()
    facts_before = {k: v for k, v in files_state(seeded).items() if k.endswith(".md")}
    cli("search", "pathlib", config=hybrid)
    assert set(json.loads(usage_file(seeded).read_text("utf-8"))) == {"fact_pref07"}
    assert {k: v for k, v in files_state(seeded).items() if k.endswith(".md")} == facts_before


def test_search_and_context_errors_are_one_line(cli: Cli, seeded: Path) -> None:
    code, _, err = cli("--agent", "../etc", "search", "x")
    assert code == 1
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("error:")
    code, _, err = cli("--agent", "no/such", "context")
    assert code == 1
    assert err.startswith("error:")
    code, _, err = cli("search", "x", "--top-k", "0")
    assert code == 2  # a usage error


def test_search_help_says_the_default_ranks_by_meaning_too(cli: Cli) -> None:
    """The default search_mode is hybrid: the help does not describe keyword search alone."""
    code, out, _ = cli("search", "--help")
    text = " ".join(out.split())
    assert code == 0
    assert "By keyword and by meaning together (search_mode: hybrid, the default" in text
    assert "match hybrid" in text
    assert "search_mode: keyword" in text  # and when it is keyword alone


@pytest.mark.parametrize("command", ["context", "search"])
def test_help_explains_with_an_example(cli: Cli, command: str) -> None:
    code, out, _ = cli(command, "--help")
    assert code == 0
    assert "Examples:" in out
    assert "deermem --user alice" in out
