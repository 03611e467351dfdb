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
    assert [r["trigger"] for r in json.loads(out)] == ["import", "restore"]
    code, _, err = run(capsys, "demo", "--root", str(root))
    assert code == 2
    assert "is not empty" in " ".join(err.replace("│", " ").split())


def test_demo_rejects_a_bad_clock(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "demo", "--now", "tomorrow")
    assert code == 2
    assert "tomorrow" in err


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
