"""The QA commands of ``deermem eval``: ``run-qa``, ``grade-qa`` and ``verify``.

Each is a thin shell: parse, call one library function, print. The commands
are listed in :data:`deermem.evaluation.cli.COMMANDS`.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from deermem.evaluation._cli_args import (
    dataset_argument,
    json_argument,
    print_json,
    protocol_arguments,
    protocol_files,
)
from deermem.evaluation.config import PROVIDER_LOCAL, PROVIDER_OPENAI_COMPATIBLE
from deermem.evaluation.protocol import Protocol, load_protocol

if TYPE_CHECKING:
    from deermem.evaluation.qa_providers import Answerer

__all__ = [
    "grade_qa_arguments",
    "grade_qa_command",
    "retry_sleep",
    "run_qa_arguments",
    "run_qa_command",
    "verify_arguments",
    "verify_command",
]

retry_sleep: Callable[[float], None] = time.sleep
"""How ``run-qa`` pauses between attempts; tests replace it to run without waiting."""

_HEX_64: Final = re.compile(r"[0-9a-fA-F]{64}")


# --- run-qa --------------------------------------------------------------------------------


def run_qa_command(args: argparse.Namespace) -> int:
    from deermem.evaluation._git import GitProbe
    from deermem.evaluation._progress import AnswerProgress
    from deermem.evaluation.qa_run import run_qa

    protocol = load_protocol(protocol_files(args))
    answerer = _answerer(args, protocol)  # the endpoint's variables, before the dataset
    try:
        with GitProbe() as git, AnswerProgress(sys.stderr, model=answerer.model) as shown:
            summary = run_qa(
                protocol,
                args.dataset,
                args.output_dir,
                answerer,
                on_start=shown.start,
                progress=shown.advance,
                git=git,
            )
    finally:
        answerer.close()
    for line in summary.lines():
        print(line)
    return 1 if summary.failed else 0


def _answerer(args: argparse.Namespace, protocol: Protocol) -> Answerer:
    from deermem.evaluation.qa_providers import HttpAnswerer, LocalAnswerer, resolve_endpoint

    qa = protocol.config.qa
    if args.provider == PROVIDER_LOCAL:
        return LocalAnswerer(qa, model_path=args.model_path)
    if args.model_path is not None:
        args.parser.error("--model-path applies to --provider local only")
    endpoint = resolve_endpoint(qa, os.environ)
    return HttpAnswerer(qa, endpoint, environ=os.environ, sleep=lambda s: retry_sleep(s))


def run_qa_arguments(parser: argparse.ArgumentParser) -> None:
    protocol_arguments(parser)
    dataset_argument(parser)
    _output_dir_argument(parser, "the run directory: qa_run.json and responses/ (resumable)")
    parser.add_argument(
        "--provider",
        choices=(PROVIDER_OPENAI_COMPATIBLE, PROVIDER_LOCAL),
        default=PROVIDER_OPENAI_COMPATIBLE,
        help=(
            "who answers: the endpoint named by the config's environment variables "
            "(default), or the embedded SmolLM2 model (needs the 'local' extra; for "
            "offline plumbing, not for results)"
        ),
    )
    parser.add_argument(
        "--model-path",
        type=Path,
        metavar="GGUF",
        help="with --provider local: another GGUF chat model (default: SmolLM2-135M-Instruct)",
    )


# --- grade-qa ------------------------------------------------------------------------------


def grade_qa_command(args: argparse.Namespace) -> int:
    from deermem.evaluation.qa_grade import grade_qa
    from deermem.evaluation.qa_report import SUITES
    from deermem.evaluation.qa_rows import POLICIES

    protocol = load_protocol(protocol_files(args))
    report = grade_qa(protocol, args.dataset, args.output_dir)
    first, second = POLICIES
    for suite in SUITES:
        comparison = report.comparisons[suite]
        cases = comparison.cases
        print(
            f"{suite}: {first} {comparison.first_correct}/{cases}, "
            f"{second} {comparison.second_correct}/{cases}, "
            f"exact McNemar p={comparison.mcnemar.p_value:.6f}"
        )
    print(f"graded {len(report.rows)} rows to {args.output_dir}")
    return 0


def grade_qa_arguments(parser: argparse.ArgumentParser) -> None:
    protocol_arguments(parser)
    dataset_argument(parser)
    _output_dir_argument(parser, "the run-qa directory; the three result files are added to it")


# --- verify --------------------------------------------------------------------------------


def verify_command(args: argparse.Namespace) -> int:
    from deermem.evaluation.statistics import DEFAULT_PARAMETERS, StatisticsParameters
    from deermem.evaluation.verify import RESULT_FILES, render_verification, verify_results

    expected: dict[str, str] = {}
    for item in args.expect_sha256:
        name, _, digest = item.partition("=")
        if name not in RESULT_FILES or not _HEX_64.fullmatch(digest):
            args.parser.error(
                f"--expect-sha256 {item!r}: expected FILE=HEX with FILE one of "
                f"{', '.join(RESULT_FILES)} and HEX 64 hex digits"
            )
        expected[name] = digest.lower()
    parameters = DEFAULT_PARAMETERS
    if args.config is not None:
        from deermem.evaluation.protocol import load_config

        statistics = load_config(args.config).statistics
        parameters = StatisticsParameters(
            seed=statistics.bootstrap_seed,
            iterations=statistics.bootstrap_iterations,
            alpha=statistics.alpha,
        )
    report = verify_results(args.results_dir, parameters=parameters, expected_sha256=expected)
    if args.json:
        print_json(report.to_dict())
    else:
        sys.stdout.write(render_verification(report))
    return 0 if report.ok else 1


def verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results_dir",
        type=Path,
        metavar="DIR",
        help="a folder with qa.rows.jsonl, qa.summary.json, qa.stats.json (and qa_run.json)",
    )
    parser.add_argument(
        "--expect-sha256",
        action="append",
        default=[],
        metavar="FILE=HEX",
        help="also require a file's published SHA-256 (repeatable), e.g. qa.rows.jsonl=d14d...",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="YAML",
        help=(
            "take the bootstrap seed, iterations and alpha from this protocol config "
            "(default: 4789, 10000, 0.05, as every bundled protocol)"
        ),
    )
    json_argument(parser)


def _output_dir_argument(parser: argparse.ArgumentParser, meaning: str) -> None:
    parser.add_argument("--output-dir", type=Path, required=True, metavar="DIR", help=meaning)
