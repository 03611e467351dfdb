"""``deermem eval report`` on graded QA results: Markdown and a chart, verified first."""

from __future__ import annotations

import shutil
from pathlib import Path

from deermem.eval.grading import StatisticsParameters
from deermem.eval.protocol import bundled_protocol_files
from deermem.eval.report import write_report
from deermem.eval.rows import write_qa_report
from deermem.eval.verify import verify_results
from tests.evaluation.conftest import Answered, Generated, Runner
from tests.evaluation.qa_support import edit_text
from tests.published import published_results


def test_the_published_results_render_with_every_figure(eval_cli: Runner, tmp_path: Path) -> None:
    out_dir = tmp_path / "report"
    code, out, err = eval_cli("report", str(published_results()), "--output-dir", str(out_dir))
    assert (code, err) == (0, "")
    assert out == f"wrote {out_dir / 'report.md'} and {out_dir / 'qa-accuracy.png'}\n"
    markdown = (out_dir / "report.md").read_text()
    expected_lines = [
        "# Capacity eviction: answers graded",
        "| model | `deepseek-v4-flash`, temperature 0.0, max_tokens 2048 |",
        # accuracy per suite and scenario
        "| official | confirmation_help | 10 | 3/10 (30.0%) | 10/10 (100.0%) |",
        "| official | access_help | 10 | 3/10 (30.0%) | 9/10 (90.0%) |",
        "| official | confidence_control | 10 | 8/10 (80.0%) | 7/10 (70.0%) |",
        "| official | noisy_signal_control | 10 | 9/10 (90.0%) | 9/10 (90.0%) |",
        "| **official** | **total** | **40** | **23/40 (57.5%)** | **35/40 (87.5%)** |",
        "| synthetic | correction_reserve | 5 | 1/5 (20.0%) | 5/5 (100.0%) |",
        "| **overall** | **all** | **45** | **24/45 (53.3%)** | **40/45 (88.9%)** |",
        # p-values and intervals
        "| official | 40 | 23/40 | 35/40 | 0.0018310546875 | +0.300 [+0.150, +0.450] |",
        "| synthetic | 5 | 1/5 | 5/5 | 0.125 | +0.800 [+0.400, +1.000] |",
        "| overall | 45 | 24/45 | 40/45 | 0.00014495849609375 | +0.356 [+0.200, +0.511] |",
        # the official 2x2 table
        "| **confidence right** | 22 | 1 |",
        "| **confidence wrong** | 13 | 4 |",
        "![Accuracy by scenario and policy](qa-accuracy.png)",
    ]
    for line in expected_lines:
        assert line in markdown.splitlines(), line
    png = (out_dir / "qa-accuracy.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert b"matplotlib" not in png.lower()

    again = tmp_path / "again"
    assert eval_cli("report", str(published_results()), "--output-dir", str(again))[0] == 0
    assert (again / "report.md").read_bytes() == markdown.encode()
    assert (again / "qa-accuracy.png").read_bytes() == png


def test_results_that_do_not_verify_are_not_reported(eval_cli: Runner, tmp_path: Path) -> None:
    folder = tmp_path / "results"
    shutil.copytree(published_results(), folder)
    edit_text(folder / "qa.stats.json", '"p_value": 0.125', '"p_value": 0.0125')
    code, out, err = eval_cli("report", str(folder))
    assert (code, out) == (1, "")
    assert "the QA results do not verify" in err
    assert f"see deermem eval verify {folder}" in err
    assert not (folder / "report.md").exists()


def test_a_directory_with_both_runs_gets_both_sections(
    eval_cli: Runner, answered: Answered, generated: Generated, tmp_path: Path
) -> None:
    directory = tmp_path / "run"
    shutil.copytree(answered.directory, directory)
    common = [*generated.protocol_args(), "--dataset", str(generated.dataset)]
    assert eval_cli("grade-qa", *common, "--output-dir", str(directory))[0] == 0
    assert eval_cli("run-policy", *common, "--output-dir", str(directory))[0] == 0
    code, out, _ = eval_cli("report", str(directory))
    assert code == 0
    assert out == (
        f"wrote {directory / 'report.md'}, {directory / 'retention.png'} and "
        f"{directory / 'qa-accuracy.png'}\n"
    )
    markdown = (directory / "report.md").read_text()
    assert markdown.startswith("# Capacity eviction: support facts retained\n")
    assert "- cap 7: confidence 27/45, hybrid-v1 45/45" in markdown
    assert "## Answers at cap 7: confidence vs hybrid-v1" in markdown
    assert "| **overall** | **all** | **45** | **27/45 (60.0%)** | **45/45 (100.0%)** |" in markdown


def test_without_charts_the_qa_report_is_the_same_text_without_the_image(
    eval_cli: Runner, tmp_path: Path
) -> None:
    with_charts, without = tmp_path / "with", tmp_path / "without"
    assert eval_cli("report", str(published_results()), "--output-dir", str(with_charts))[0] == 0
    written = write_report(published_results(), output_dir=without, charts=False)
    assert written == (without / "report.md",)
    note = (
        "*Accuracy by scenario and policy: no chart; drawing it needs matplotlib "
        "(`uv sync --extra eval`).*"
    )
    assert (without / "report.md").read_text() == (with_charts / "report.md").read_text().replace(
        "![Accuracy by scenario and policy](qa-accuracy.png)", note
    )


def test_the_bootstrap_parameters_are_the_protocols_not_the_stats_files(
    eval_cli: Runner, tmp_path: Path
) -> None:
    """As verify: a stats file re-derived under another seed (or a billion resamples)
    is a finding, not followed; --config names another protocol's parameters."""
    other = StatisticsParameters(seed=4790, iterations=10_000, alpha=0.05)
    derived = verify_results(published_results(), parameters=other).derived
    assert derived is not None
    folder = tmp_path / "results"
    write_qa_report(folder, derived)  # consistent with its rows under seed 4790
    shutil.copy(published_results() / "qa_run.json", folder)
    code, out, err = eval_cli("report", str(folder))
    assert (code, out) == (1, "")
    assert "suites.official.bootstrap.seed: expected 4789, got 4790" in err
    assert not (folder / "report.md").exists()

    config = tmp_path / "config.yaml"
    text = bundled_protocol_files().config.read_text()
    assert text.count("bootstrap_seed: 4789\n") == 1
    config.write_text(text.replace("bootstrap_seed: 4789\n", "bootstrap_seed: 4790\n"))
    code, _, err = eval_cli("report", str(folder), "--config", str(config))
    assert (code, err) == (0, "")
    assert (folder / "report.md").exists()
