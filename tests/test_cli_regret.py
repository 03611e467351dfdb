"""``deermem regret`` as a user runs it: the table, the JSON schema, --since, --chart."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from deermem.cli import main
from deermem.library.regret import REPORT_SCHEMA

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run ``deermem --root <tmp> --config <cap 10, confidence, shadow on> --user alice ARGS``."""
    config = tmp_path / "deermem.toml"
    config.write_text(
        'max_facts = 10\nfact_eviction_policy = "confidence"\n'
        "fact_eviction_shadow_enabled = true\n",
        "utf-8",
    )

    assert main(["--root", str(tmp_path / "store"), "init"]) == 0  # a store: the CLI writes
    capsys.readouterr()

    def invoke(*args: str) -> tuple[int, str, str]:
        code = main(
            ["--root", str(tmp_path / "store"), "--config", str(config), "--user", "alice", *args]
        )
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


def regretful(cli: Cli) -> str:
    """Fill the library, evict one fact, say it again and search for it: returns its id."""
    for number in range(10):
        assert (
            cli("facts", "add", f"Remembered thing {number}", "--confidence", f"0.{number}5")[0]
            == 0
        )
    code, out, _ = cli("facts", "add", "One more remembered thing", "--confidence", "0.9", "--json")
    assert code == 0
    [evicted] = json.loads(out)["evicted"]
    assert cli("search", "remembered thing 0")[0] == 0  # a missed recall
    code, out, _ = cli("facts", "list", "--json")
    assert cli("facts", "rm", json.loads(out)[0]["id"])[0] == 0  # room for it
    code, out, _ = cli("facts", "add", "remembered THING 0", "--json")
    assert code == 0
    assert json.loads(out)["relearned"] == evicted
    return str(evicted)


def test_the_report_as_a_table(cli: Cli) -> None:
    evicted = regretful(cli)
    code, out, err = cli("regret")
    assert (code, err) == (0, "")
    assert "confidence" in out
    assert "hybrid-v1" in out
    assert "relearned 1" in out
    assert "recall 1" in out  # "missed recall 1", folded to the terminal's width
    assert f"most regretted under confidence (active): {evicted} (context, 2)" in out
    assert "Remembered thing" not in out  # ids and categories only


REGRET_DOC = Path(__file__).resolve().parent.parent / "docs" / "regret.md"


def shape(line: str) -> str:
    """A printed line with its times (or the doc's placeholders for them) as ``T``."""
    line = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z", "T", line)
    return re.sub(r"<[a-z ]+>", "T", line)


def test_the_docs_example_prints_what_the_command_prints(cli: Cli) -> None:
    """docs/regret.md's example: its header and notes are the command's, times aside."""
    regretful(cli)
    code, out, _ = cli("regret", "--since", "30d")
    assert code == 0
    doc = REGRET_DOC.read_text("utf-8")
    example = re.search(r"\$ deermem --user alice regret --since 30d\n(.*?)\n```", doc, re.S)
    assert example is not None
    shown = [shape(line) for line in example.group(1).splitlines()]
    printed = shape(" ".join(out.split()))  # lines folded to the terminal's width, unfolded
    assert shown[0] == shape(out.splitlines()[0]) == "regret from T to T"
    note = "note: the audit reaches back to T only (raise eviction_audit_max_entries to keep more)"
    assert shown[-1] == note
    assert note in printed  # the store is younger than the window
    prefix = "most regretted under confidence (active): "
    assert any(line.startswith(prefix) for line in shown)
    assert prefix in printed


def test_the_report_as_json_follows_the_documented_schema(cli: Cli) -> None:
    evicted = regretful(cli)
    code, out, _ = cli("regret", "--json", "--since", "1d")
    assert code == 0
    report = json.loads(out)
    assert report["schema"] == REPORT_SCHEMA
    assert report["since"] is not None
    [active, shadow] = report["policies"]
    assert (active["policyVersion"], active["role"]) == ("confidence", "active")
    assert (shadow["policyVersion"], shadow["role"]) == ("hybrid-v1", "shadow")
    assert active["events"]["relearned"] == 1
    assert active["events"]["missed_recall"] == 1
    assert active["evictions"] >= 1
    assert active["mostRegretted"][0] == {
        "factId": evicted,
        "category": "context",
        "events": 2,
        "kinds": {"missed_recall": 1, "relearned": 1},
    }
    assert "Remembered" not in out


def test_an_empty_memory_reports_no_rate(cli: Cli) -> None:
    code, out, _ = cli("regret", "--json")
    assert code == 0
    rows = json.loads(out)["policies"]
    assert [(r["policyVersion"], r["evictions"], r["regretRate"]) for r in rows] == [
        ("confidence", 0, None),
        ("hybrid-v1", 0, None),
    ]


def test_an_unreadable_since_is_a_usage_error(cli: Cli) -> None:
    code, out, err = cli("regret", "--since", "last tuesday")
    assert code == 2
    assert "last tuesday" in err
    assert "30d" in err
    assert out == ""


def test_a_since_after_now_is_a_usage_error_not_an_empty_report(cli: Cli) -> None:
    # A typo for 2026 printed "regret from 2099-01-01 to <now>" and all zeros: no regret.
    code, out, err = cli("regret", "--since", "2099-01-01")
    assert code == 2
    assert "2099-01-01" in err
    assert "after now" in err
    assert out == ""
    assert cli("regret", "--since", "0d")[0] == 0  # now itself is the edge of the window


def test_a_chart_is_drawn_beside_the_report(cli: Cli, tmp_path: Path) -> None:
    regretful(cli)
    chart = tmp_path / "regret.png"
    code, out, _ = cli("regret", "--chart", str(chart))
    assert code == 0
    assert f"chart written to {chart}" in out
    assert chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    first = chart.read_bytes()
    assert cli("regret", "--chart", str(chart))[0] == 0
    assert chart.read_bytes() == first  # the same report draws the same bytes


def test_without_matplotlib_the_chart_says_how_to_get_it(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    regretful(cli)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the extra were not installed
    monkeypatch.setitem(sys.modules, "matplotlib.backends", None)
    chart = tmp_path / "regret.png"
    code, _, err = cli("regret", "--chart", str(chart))
    assert code == 1
    assert "uv sync --extra eval" in err
    assert not chart.exists()


def test_a_damaged_regret_log_is_an_error_naming_it(cli: Cli, tmp_path: Path) -> None:
    regretful(cli)
    log = tmp_path / "store/users/alice/agents/__default__/.metadata/regret-events.json"
    log.write_text("{ broken", "utf-8")
    code, _, err = cli("regret")
    assert code == 1
    assert "regret-events.json" in err
    assert "Traceback" not in err
