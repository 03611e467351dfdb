"""The QA commands of ``deermem eval``: ``run-qa``, ``grade-qa`` and ``verify``.

Each is a thin shell: parse, call one library function, print. They are
registered on the sub-app in :mod:`deermem.cli.eval.app`; as there, the
command bodies import the harness they run.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Final

import typer

from deermem.cli.eval.options import (
    CONFIG_OPTION,
    DATASET_OPTION,
    JSON_OPTION,
    OFFICIAL_MANIFEST_OPTION,
    SYNTHETIC_MANIFEST_OPTION,
    load_named_protocol,
    require_dataset,
)
from deermem.cli.eval.output import print_json
from deermem.eval.protocol.config import PROVIDER_LOCAL, PROVIDER_OPENAI_COMPATIBLE
from deermem.eval.published import DEFAULT_PUBLISHED, PUBLISHED

if TYPE_CHECKING:
    from deermem.eval.protocol.bundle import Protocol
    from deermem.eval.qa.providers import Answerer

__all__ = [
    "RUN_QA_EXAMPLES",
    "VERIFY_EXAMPLES",
    "Provider",
    "grade_qa",
    "retry_sleep",
    "run_qa",
    "verify",
]

retry_sleep: Callable[[float], None] = time.sleep
"""How ``run-qa`` pauses between attempts; tests replace it to run without waiting."""

RUN_QA_EXAMPLES: Final = (
    "Example: `export DEERMEM_EVAL_ANSWER_BASE_URL=https://api.deepseek.com "
    "DEERMEM_EVAL_ANSWER_API_KEY=...`, then `deermem eval run-qa --dataset "
    "longmemeval_oracle.json --output-dir runs/qa`; offline: `deermem eval run-qa --provider "
    "local --dataset longmemeval_oracle.json --output-dir runs/local`"
)
VERIFY_EXAMPLES: Final = (
    "Example: `deermem eval verify` (the original project's published results, shipped with "
    "deermem), `deermem eval verify runs/qa --json`, or `deermem eval verify results/ "
    "--expect-sha256 qa.rows.jsonl=d14dcd1e57bb...`"
)
_HEX_64: Final = re.compile(r"[0-9a-fA-F]{64}")


class Provider(StrEnum):
    """Who answers the questions of ``run-qa``."""

    OPENAI_COMPATIBLE = PROVIDER_OPENAI_COMPATIBLE
    LOCAL = PROVIDER_LOCAL


# --- run-qa --------------------------------------------------------------------------------


def run_qa(
    ctx: typer.Context,
    config: Path | None = CONFIG_OPTION,
    official_manifest: Path | None = OFFICIAL_MANIFEST_OPTION,
    synthetic_manifest: Path | None = SYNTHETIC_MANIFEST_OPTION,
    dataset: Path | None = DATASET_OPTION,
    output_dir: Path = typer.Option(
        ...,
        "--output-dir",
        metavar="DIR",
        help="The run directory: qa_run.json and responses/ (resumable).",
    ),
    provider: Provider = typer.Option(
        Provider.OPENAI_COMPATIBLE,
        "--provider",
        help=(
            "Who answers: the endpoint named by the config's environment variables, or the "
            "embedded SmolLM2 model (needs the 'local' extra; for offline plumbing, not for "
            "results)."
        ),
    ),
    model_path: Path | None = typer.Option(
        None,
        "--model-path",
        metavar="GGUF",
        help="With --provider local: another GGUF chat model [default: SmolLM2-135M-Instruct].",
    ),
) -> None:
    """Ask the model every question under both policies, resumably.

    Build the 90 answer tasks (45 cases x 2 policies at the QA cap): the facts
    each policy kept, rendered by the answer prompt. Send each to the
    OpenAI-compatible endpoint named by the config's environment variables
    (the base URL and the key; checked before the dataset is read), or to the
    embedded model with --provider local, and store every answer with the
    fingerprint of its request in DIR/responses/. Run it again to retry
    failures: an answer is reused only if it provably answers the task
    recomputed now. Exit status 1 if any call failed.
    """
    from deermem.cli.eval.progress import AnswerProgress
    from deermem.eval.qa.run import run_qa as answer_all

    path = require_dataset(ctx, dataset)
    if provider is not Provider.LOCAL and model_path is not None:
        ctx.fail("--model-path applies to --provider local only")
    protocol = load_named_protocol(config, official_manifest, synthetic_manifest)
    answerer = _answerer(protocol, provider, model_path)  # the endpoint, before the dataset
    try:
        with AnswerProgress(sys.stderr, model=answerer.model) as shown:
            summary = answer_all(
                protocol,
                path,
                output_dir,
                answerer,
                on_start=shown.start,
                progress=shown.advance,
            )
    finally:
        answerer.close()
    for line in summary.lines():
        typer.echo(line)
    if summary.failed:
        raise typer.Exit(1)


def _answerer(protocol: Protocol, provider: Provider, model_path: Path | None) -> Answerer:
    from deermem.eval.qa.providers import HttpAnswerer, LocalAnswerer, resolve_endpoint

    qa = protocol.config.qa
    if provider is Provider.LOCAL:
        return LocalAnswerer(qa, model_path=model_path)
    endpoint = resolve_endpoint(qa, os.environ)
    return HttpAnswerer(qa, endpoint, environ=os.environ, sleep=lambda s: retry_sleep(s))


# --- grade-qa ------------------------------------------------------------------------------


def grade_qa(
    ctx: typer.Context,
    config: Path | None = CONFIG_OPTION,
    official_manifest: Path | None = OFFICIAL_MANIFEST_OPTION,
    synthetic_manifest: Path | None = SYNTHETIC_MANIFEST_OPTION,
    dataset: Path | None = DATASET_OPTION,
    output_dir: Path = typer.Option(
        ...,
        "--output-dir",
        metavar="DIR",
        help="The run-qa directory; the three result files are added to it.",
    ),
) -> None:
    """Check every stored answer against the protocol, grade, and write the report.

    Read-only checks first: qa_run.json names the same five protocol files,
    and every stored answer carries its task's identity, kept facts and
    request fingerprint as recomputed from the protocol and the dataset; any
    missing or mismatched answer refuses the whole grading. Then grade each
    answer blind against the dataset's reference with
    deterministic-overlap-v1 and write qa.rows.jsonl, qa.summary.json and
    qa.stats.json (McNemar and paired bootstrap per suite). No network; the
    same run gives the same bytes.
    """
    from deermem.eval.qa.grade import grade_qa as grade_all
    from deermem.eval.qa.results import SUITES
    from deermem.eval.qa.rows import POLICIES

    path = require_dataset(ctx, dataset)
    protocol = load_named_protocol(config, official_manifest, synthetic_manifest)
    report = grade_all(protocol, path, output_dir)
    first, second = POLICIES
    for suite in SUITES:
        comparison = report.comparisons[suite]
        cases = comparison.cases
        typer.echo(
            f"{suite}: {first} {comparison.first_correct}/{cases}, "
            f"{second} {comparison.second_correct}/{cases}, "
            f"exact McNemar p={comparison.mcnemar.p_value:.6f}"
        )
    typer.echo(f"graded {len(report.rows)} rows to {output_dir}")


# --- verify --------------------------------------------------------------------------------


def verify(
    ctx: typer.Context,
    results_dir: Path | None = typer.Argument(
        None,
        metavar="DIR",
        show_default=False,
        help=(
            "A folder with qa.rows.jsonl, qa.summary.json, qa.stats.json (and qa_run.json) "
            "[default: the published results named by --published]."
        ),
    ),
    published: str | None = typer.Option(
        None,
        "--published",
        metavar="NAME",
        show_default=False,
        help=(
            "Verify results shipped with deermem, against the hashes they were published with: "
            f"{', '.join(PUBLISHED)} [default without DIR: {DEFAULT_PUBLISHED}]."
        ),
    ),
    expect_sha256: list[str] = typer.Option(
        [],
        "--expect-sha256",
        metavar="FILE=HEX",
        help="Also require a file's published SHA-256 (repeatable), e.g. qa.rows.jsonl=d14d...",
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        metavar="YAML",
        help=(
            "Take the bootstrap seed, iterations and alpha from this protocol config "
            "[default: 4789, 10000, 0.05, as every bundled protocol]."
        ),
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Re-derive a published QA report from its rows and compare it byte for byte.

    Check qa.rows.jsonl row by row (schema, pairs, fact ids, fingerprints,
    grades their rules allow, no private text), re-derive qa.summary.json and
    qa.stats.json from the rows and compare them byte for byte, and check
    qa_run.json. Without DIR, verify the original project's results that ship
    with deermem (DeerFlow PR #4810), their published SHA-256 included. Needs
    no dataset, no model and no key. Exit status 1 unless everything matches.
    """
    from deermem.eval.grading.statistics import DEFAULT_PARAMETERS, StatisticsParameters
    from deermem.eval.verify.check import verify_results
    from deermem.eval.verify.findings import RESULT_FILES
    from deermem.eval.verify.render import render_verification

    if results_dir is not None and published is not None:
        ctx.fail("give a results directory or --published, not both")
    expected: dict[str, str] = {}
    if results_dir is None:
        name = DEFAULT_PUBLISHED if published is None else published
        if name not in PUBLISHED:
            ctx.fail(
                f"--published {name!r}: no such published results (shipped: {', '.join(PUBLISHED)})"
            )
        results_dir = PUBLISHED[name].directory
        expected.update(PUBLISHED[name].sha256)
    for item in expect_sha256:
        name, _, digest = item.partition("=")
        if name not in RESULT_FILES or not _HEX_64.fullmatch(digest):
            ctx.fail(
                f"--expect-sha256 {item!r}: expected FILE=HEX with FILE one of "
                f"{', '.join(RESULT_FILES)} and HEX 64 hex digits"
            )
        expected[name] = digest.lower()
    parameters = DEFAULT_PARAMETERS
    if config is not None:
        from deermem.eval.protocol.bundle import load_config

        statistics = load_config(config).statistics
        parameters = StatisticsParameters(
            seed=statistics.bootstrap_seed,
            iterations=statistics.bootstrap_iterations,
            alpha=statistics.alpha,
        )
    report = verify_results(results_dir, parameters=parameters, expected_sha256=expected)
    if as_json:
        print_json(report.to_dict())
    else:
        typer.echo(render_verification(report), nl=False)
    if not report.ok:
        raise typer.Exit(1)
