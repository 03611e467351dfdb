"""``deermem eval``: the evaluation commands, a typer sub-app of ``deermem``.

Each command parses its options, calls the library, and prints. Command bodies
import the harness they run, so that the rest of ``deermem`` (``deermem facts
...``), which loads this module to list ``eval`` in its help, does not load the
evaluation. The QA commands (``run-qa``, ``grade-qa``, ``verify``) are in
:mod:`deermem.cli.eval.qa`.

Exit status: 0 on success; 1 when deermem refuses (bad protocol, wrong
dataset, results already present), with the reason on stderr; 2 for usage
errors.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from deermem.cli.eval import qa
from deermem.cli.eval.options import (
    CONFIG_OPTION,
    DATASET_OPTION,
    JSON_OPTION,
    OFFICIAL_MANIFEST_OPTION,
    SYNTHETIC_MANIFEST_OPTION,
    load_named_protocol,
    require_dataset,
)
from deermem.cli.eval.output import print_json, print_retention

__all__ = ["app"]

app = typer.Typer(
    name="eval",
    help=(
        "Reproduce the capacity-eviction evaluation: the LongMemEval pools of the original "
        "DeerMem study, the production capacity gate, confidence vs hybrid-v1.\n\n"
        "The dataset is never downloaded; see docs/evaluation.md for where to get it."
    ),
    epilog="Example: `deermem eval run-policy --dataset longmemeval_oracle.json "
    "--output-dir runs/policy`",
    no_args_is_help=True,
)


@app.command(
    "validate-contracts",
    short_help="Check the protocol files (no dataset needed).",
    epilog="Example: `deermem eval validate-contracts --config my-bundle/config.yaml "
    "--official-manifest my-bundle/official.json --synthetic-manifest my-bundle/synthetic.json`",
)
def validate_contracts(
    config: Path | None = CONFIG_OPTION,
    official_manifest: Path | None = OFFICIAL_MANIFEST_OPTION,
    synthetic_manifest: Path | None = SYNTHETIC_MANIFEST_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Load the protocol bundle strictly and cross-check it.

    The schema of every file, one protocol id across the three files, the
    hybrid-v1 version the config requires, and the answer prompt's SHA-256.
    """
    protocol = load_named_protocol(config, official_manifest, synthetic_manifest)
    if as_json:
        print_json(
            {
                "protocol_id": protocol.protocol_id,
                "official_cases": len(protocol.official.question_ids),
                "synthetic_cases": len(protocol.synthetic.cases),
                "files": {
                    "config": str(protocol.files.config),
                    "official_manifest": str(protocol.files.official_manifest),
                    "synthetic_manifest": str(protocol.files.synthetic_manifest),
                    "answer_prompt": str(protocol.answer_prompt_path),
                },
                "artifacts": protocol.artifacts.to_dict(),
            }
        )
        return
    typer.echo(
        f"validated {len(protocol.official.question_ids)} official and "
        f"{len(protocol.synthetic.cases)} synthetic cases"
    )


@app.command(
    "validate",
    short_help="Check the dataset and prepare the 45 cases.",
    epilog="Example: `deermem eval validate --dataset longmemeval_oracle.json`, or "
    "`LONGMEMEVAL_ORACLE_PATH=longmemeval_oracle.json deermem eval validate --json`",
)
def validate(
    ctx: typer.Context,
    config: Path | None = CONFIG_OPTION,
    official_manifest: Path | None = OFFICIAL_MANIFEST_OPTION,
    synthetic_manifest: Path | None = SYNTHETIC_MANIFEST_OPTION,
    dataset: Path | None = DATASET_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Everything validate-contracts checks, then the dataset.

    Its SHA-256 (before it is parsed), the recomputed selection of the 40
    official questions against the manifest, the distractor bank and all 45
    pools. Writes nothing.
    """
    from deermem.eval.protocol.cases import SOURCE_LONGMEMEVAL, SOURCE_SYNTHETIC, build_cases
    from deermem.eval.protocol.dataset import load_dataset

    path = require_dataset(ctx, dataset)
    protocol = load_named_protocol(config, official_manifest, synthetic_manifest)
    data = load_dataset(path, expected_sha256=protocol.config.dataset.sha256)
    cases = build_cases(protocol, data)
    if as_json:
        print_json(
            {
                "protocol_id": protocol.protocol_id,
                "dataset_sha256": data.sha256,
                "dataset_rows": len(data),
                "cases": len(cases),
                "official_cases": sum(1 for case in cases if case.source == SOURCE_LONGMEMEVAL),
                "synthetic_cases": sum(1 for case in cases if case.source == SOURCE_SYNTHETIC),
            }
        )
        return
    typer.echo(f"validated dataset {data.sha256} and prepared {len(cases)} cases")


@app.command(
    "run-policy",
    short_help="Run both policies on every case at every cap; write the results.",
    epilog="Example: `deermem eval run-policy --dataset longmemeval_oracle.json "
    "--output-dir runs/policy`",
)
def run_policy(
    ctx: typer.Context,
    config: Path | None = CONFIG_OPTION,
    official_manifest: Path | None = OFFICIAL_MANIFEST_OPTION,
    synthetic_manifest: Path | None = SYNTHETIC_MANIFEST_OPTION,
    dataset: Path | None = DATASET_OPTION,
    output_dir: Path = typer.Option(
        ...,
        "--output-dir",
        metavar="DIR",
        help="Where to write policy.raw.jsonl, summary.json and run.json (must not hold them).",
    ),
) -> None:
    """Run the production capacity gate on the 45 pools at caps 5, 7 and 9.

    Under confidence and hybrid-v1 (270 decisions, no network); writes
    policy.raw.jsonl, summary.json and run.json, and prints how many support
    facts each policy kept. Existing result files are never overwritten.
    """
    from deermem.eval.policy_run.retention import retention_table
    from deermem.eval.policy_run.run import (
        policy_output_paths,
        policy_summary,
        write_policy_run,
    )
    from deermem.eval.policy_run.run import run_policy as run_all
    from deermem.eval.protocol.cases import build_cases
    from deermem.eval.protocol.dataset import load_dataset
    from deermem.eval.result_files import ensure_absent

    path = require_dataset(ctx, dataset)
    protocol = load_named_protocol(config, official_manifest, synthetic_manifest)
    ensure_absent(policy_output_paths(output_dir))  # refuse before the work, not after it
    data = load_dataset(path, expected_sha256=protocol.config.dataset.sha256)
    cases = build_cases(protocol, data)
    outcomes = run_all(protocol, cases)
    write_policy_run(output_dir, protocol, data.sha256, outcomes)
    typer.echo(f"wrote {len(outcomes)} policy rows for {len(cases)} cases to {output_dir}")
    print_retention(retention_table(policy_summary(protocol.protocol_id, outcomes)), sys.stdout)


app.command(
    "run-qa",
    short_help="Ask the model every question under both policies (resumable).",
    epilog=qa.RUN_QA_EXAMPLES,
)(qa.run_qa)
app.command(
    "grade-qa",
    short_help="Check every stored answer against the protocol, grade, write the report.",
    epilog="Example: `deermem eval grade-qa --dataset longmemeval_oracle.json "
    "--output-dir runs/qa`",
)(qa.grade_qa)
app.command(
    "verify",
    short_help="Re-derive a published QA report from its rows and compare byte for byte.",
    epilog=qa.VERIFY_EXAMPLES,
)(qa.verify)


@app.command(
    "report",
    short_help="Render a run's results as Markdown and PNG charts.",
    epilog="Example: `deermem eval report runs/policy`, or `deermem eval report runs/qa "
    "--output-dir report/`",
)
def report(
    run_dir: Path = typer.Argument(
        ...,
        metavar="DIR",
        help="A run-policy directory, a graded run-qa directory, or one holding both.",
    ),
    output_dir: Path | None = typer.Option(
        None,
        "--output-dir",
        metavar="DIR",
        help="Where to write report.md and the charts [default: DIR].",
    ),
) -> None:
    """Read a run directory and write report.md with what it holds.

    For a policy run, the retention table and retention.png (support facts
    kept by cap and policy); for graded QA results (which must verify),
    accuracy by suite and scenario, the 2x2 tables, McNemar p-values and
    bootstrap intervals, and qa-accuracy.png. Deterministic: the same results
    give the same bytes. The charts need matplotlib, the `eval` extra; without
    it report.md is written alone.
    """
    from deermem.eval.report.png import CHARTS_EXTRA, missing_chart_module
    from deermem.eval.report.write import write_report

    missing = missing_chart_module()
    written = [
        str(path) for path in write_report(run_dir, output_dir=output_dir, charts=not missing)
    ]
    listed = written[0] if len(written) == 1 else f"{', '.join(written[:-1])} and {written[-1]}"
    typer.echo(f"wrote {listed}")
    if missing:
        reason = (
            "matplotlib is not installed"
            if missing.partition(".")[0] == "matplotlib"
            else f"matplotlib cannot import {missing}"
        )
        typer.echo(f"no charts: {reason}; install them with {CHARTS_EXTRA}", err=True)
