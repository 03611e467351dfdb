"""``deermem eval``: the evaluation commands.

This command line is argparse, not typer, on purpose: ``deermem eval
validate`` reads a 15 MB file in a few tenths of a second, and importing the
typer/rich stack alone would take longer than that on a small machine. The
root ``deermem`` entry point hands ``eval`` over here before it imports
typer. rich is imported only to print a table to a terminal; piped output
gets the same table as plain text.

Each command is one entry in :data:`COMMANDS`; the QA commands live in
:mod:`deermem.evaluation._cli_qa`.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple, TextIO

from deermem._exceptions import DeerMemError
from deermem.evaluation._cli_args import (
    DATASET_ENV,
    dataset_argument,
    json_argument,
    print_json,
    protocol_arguments,
    protocol_files,
)
from deermem.evaluation._cli_qa import (
    grade_qa_arguments,
    grade_qa_command,
    run_qa_arguments,
    run_qa_command,
    verify_arguments,
    verify_command,
)
from deermem.evaluation.protocol import load_protocol

if TYPE_CHECKING:
    from deermem.evaluation.retention import RetentionTable

__all__ = ["COMMANDS", "Command", "CyclicCollector", "build_parser", "main", "print_retention"]

PROG: Final = "deermem eval"


class Command(NamedTuple):
    """One ``deermem eval`` subcommand: its help, its arguments and what it runs.

    Attributes:
        batch: a bounded batch command — it allocates only acyclic data and
            ends within seconds — so it runs with CPython's cyclic garbage
            collector paused (:class:`CyclicCollector`) and, run as a
            program, ends without the interpreter's teardown
            (:func:`deermem._console.run`). False for ``run-qa``, which may
            talk to a model for many minutes through third-party stacks.
    """

    name: str
    summary: str
    description: str
    example: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    batch: bool = True


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter, told the width up front.

    Left to itself it imports shutil (and with it bz2 and lzma) to ask for
    the terminal size — on every start, since argparse formats each argument
    once as it is added. That is a few milliseconds of a command that aims
    to finish in a quarter of a second.
    """

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_terminal_width())

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Wrap a one-paragraph description to 78 columns; keep an epilog's lines.

        Wrapping here, when help is printed, rather than when the parser is
        built keeps :mod:`textwrap` and the wrapping of seven descriptions
        out of every command's start-up.
        """
        if "\n" not in text:
            import textwrap

            text = textwrap.fill(text, 78)
        return super()._fill_text(text, width, indent)


def _terminal_width() -> int:
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            columns = os.get_terminal_size().columns
        except OSError:
            columns = 80
    return max(columns - 2, 40)


# --- commands ---------------------------------------------------------------------------


def _validate_contracts(args: argparse.Namespace) -> int:
    protocol = load_protocol(protocol_files(args))
    if args.json:
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
        return 0
    print(
        f"validated {len(protocol.official.question_ids)} official and "
        f"{len(protocol.synthetic.cases)} synthetic cases"
    )
    return 0


def _validate(args: argparse.Namespace) -> int:
    from deermem.evaluation.cases import SOURCE_LONGMEMEVAL, SOURCE_SYNTHETIC, build_cases
    from deermem.evaluation.dataset import load_dataset

    protocol = load_protocol(protocol_files(args))
    dataset = load_dataset(Path(args.dataset), expected_sha256=protocol.config.dataset.sha256)
    cases = build_cases(protocol, dataset)
    if args.json:
        print_json(
            {
                "protocol_id": protocol.protocol_id,
                "dataset_sha256": dataset.sha256,
                "dataset_rows": len(dataset),
                "cases": len(cases),
                "official_cases": sum(1 for case in cases if case.source == SOURCE_LONGMEMEVAL),
                "synthetic_cases": sum(1 for case in cases if case.source == SOURCE_SYNTHETIC),
            }
        )
        return 0
    print(f"validated dataset {dataset.sha256} and prepared {len(cases)} cases")
    return 0


def _run_policy(args: argparse.Namespace) -> int:
    from deermem.evaluation._git import GitProbe
    from deermem.evaluation._io import ensure_absent
    from deermem.evaluation.cases import build_cases
    from deermem.evaluation.dataset import load_dataset
    from deermem.evaluation.eviction import (
        policy_output_paths,
        policy_summary,
        run_policy,
        write_policy_run,
    )
    from deermem.evaluation.retention import retention_table

    protocol = load_protocol(protocol_files(args))
    ensure_absent(policy_output_paths(args.output_dir))  # fail before the work, not after
    with GitProbe() as git:  # asks git while the dataset is read
        dataset = load_dataset(Path(args.dataset), expected_sha256=protocol.config.dataset.sha256)
        cases = build_cases(protocol, dataset)
        outcomes = run_policy(protocol, cases)
        write_policy_run(args.output_dir, protocol, dataset.sha256, outcomes, git=git)
    print(f"wrote {len(outcomes)} policy rows for {len(cases)} cases to {args.output_dir}")
    print_retention(retention_table(policy_summary(protocol.protocol_id, outcomes)), sys.stdout)
    return 0


def _report(args: argparse.Namespace) -> int:
    from deermem.evaluation.report import write_report

    written = [str(path) for path in write_report(args.run_dir, output_dir=args.output_dir)]
    print(f"wrote {', '.join(written[:-1])} and {written[-1]}")
    return 0


# --- arguments --------------------------------------------------------------------------


def _contracts_arguments(parser: argparse.ArgumentParser) -> None:
    protocol_arguments(parser)
    json_argument(parser)


def _validate_arguments(parser: argparse.ArgumentParser) -> None:
    protocol_arguments(parser)
    dataset_argument(parser)
    json_argument(parser)


def _run_policy_arguments(parser: argparse.ArgumentParser) -> None:
    protocol_arguments(parser)
    dataset_argument(parser)
    parser.add_argument(
        "--output-dir",
        type=Path,
        required=True,
        metavar="DIR",
        help="where to write policy.raw.jsonl, summary.json and run.json (must not hold them)",
    )


def _report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dir",
        type=Path,
        metavar="DIR",
        help="a run-policy directory, a graded run-qa directory, or one holding both",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        metavar="DIR",
        help="where to write report.md and the charts (default: DIR)",
    )


COMMANDS: Final = (
    Command(
        name="validate-contracts",
        summary="check the protocol files (no dataset needed)",
        description=(
            "Load the protocol bundle strictly and cross-check it: schema of every file, one "
            "protocol id across the three files, the hybrid-v1 version the config requires, "
            "and the answer prompt's SHA-256."
        ),
        example="deermem eval validate-contracts --config my-bundle/config.yaml \\\n"
        "    --official-manifest my-bundle/official.json "
        "--synthetic-manifest my-bundle/synthetic.json",
        arguments=_contracts_arguments,
        run=_validate_contracts,
    ),
    Command(
        name="validate",
        summary="check the dataset and prepare the 45 cases",
        description=(
            "Everything validate-contracts checks, then the dataset: its SHA-256 (before it is "
            "parsed), the recomputed selection of the 40 official questions against the "
            "manifest, the distractor bank and all 45 pools. Writes nothing."
        ),
        example=f"deermem eval validate --dataset longmemeval_oracle.json\n"
        f"{DATASET_ENV}=longmemeval_oracle.json deermem eval validate --json",
        arguments=_validate_arguments,
        run=_validate,
    ),
    Command(
        name="run-policy",
        summary="run both policies on every case at every cap; write the results",
        description=(
            "Run the production capacity gate on the 45 pools at caps 5, 7 and 9 under "
            "confidence and hybrid-v1 (270 decisions, no network), write policy.raw.jsonl, "
            "summary.json and run.json, and print how many support facts each policy kept. "
            "Existing result files are never overwritten."
        ),
        example=(
            "deermem eval run-policy --dataset longmemeval_oracle.json --output-dir runs/policy"
        ),
        arguments=_run_policy_arguments,
        run=_run_policy,
    ),
    Command(
        name="run-qa",
        summary="ask the model every question under both policies (resumable)",
        description=(
            "Build the 90 answer tasks (45 cases x 2 policies at the QA cap): the facts each "
            "policy kept, rendered by the answer prompt. Send each to the OpenAI-compatible "
            "endpoint named by the config's environment variables (the base URL and the key; "
            "checked before the dataset is read), or to the embedded model with --provider "
            "local, and store every answer with the fingerprint of its request in "
            "DIR/responses/. Run it again to retry failures: an answer is reused only if it "
            "provably answers the task recomputed now. Exit status 1 if any call failed."
        ),
        example=(
            "export DEERMEM_EVAL_ANSWER_BASE_URL=https://api.deepseek.com "
            "DEERMEM_EVAL_ANSWER_API_KEY=...\n"
            "  deermem eval run-qa --dataset longmemeval_oracle.json --output-dir runs/qa\n"
            "  deermem eval run-qa --provider local --dataset longmemeval_oracle.json "
            "--output-dir runs/local"
        ),
        arguments=run_qa_arguments,
        run=run_qa_command,
        batch=False,
    ),
    Command(
        name="grade-qa",
        summary="check every stored answer against the protocol, grade, write the report",
        description=(
            "Read-only checks first: qa_run.json names the same five protocol files, and every "
            "stored answer carries its task's identity, kept facts and request fingerprint as "
            "recomputed from the protocol and the dataset; any missing or mismatched answer "
            "refuses the whole grading. Then grade each answer blind against the dataset's "
            "reference with deterministic-overlap-v1 and write qa.rows.jsonl, qa.summary.json "
            "and qa.stats.json (McNemar and paired bootstrap per suite). No network; the same "
            "run gives the same bytes."
        ),
        example="deermem eval grade-qa --dataset longmemeval_oracle.json --output-dir runs/qa",
        arguments=grade_qa_arguments,
        run=grade_qa_command,
    ),
    Command(
        name="verify",
        summary="re-derive a published QA report from its rows and compare byte for byte",
        description=(
            "Check qa.rows.jsonl row by row (schema, pairs, fact ids, fingerprints, grades "
            "their rules allow, no private text), re-derive qa.summary.json and qa.stats.json "
            "from the rows and compare them byte for byte, and check qa_run.json. Needs no "
            "dataset, no model and no key. Exit status 1 unless everything matches."
        ),
        example=(
            "deermem eval verify ../shared/reference/deerflow-pr4810-results\n"
            "  deermem eval verify runs/qa --json\n"
            "  deermem eval verify results/ --expect-sha256 qa.rows.jsonl=d14dcd1e57bb..."
        ),
        arguments=verify_arguments,
        run=verify_command,
    ),
    Command(
        name="report",
        summary="render a run's results as Markdown and PNG charts",
        description=(
            "Read a run directory and write report.md with what it holds: for a policy run, "
            "the retention table and retention.png (support facts kept by cap and policy); "
            "for graded QA results (which must verify), accuracy by suite and scenario, the "
            "2x2 tables, McNemar p-values and bootstrap intervals, and qa-accuracy.png. "
            "Deterministic: the same results give the same bytes."
        ),
        example="deermem eval report runs/policy\n  deermem eval report "
        "../shared/reference/deerflow-pr4810-results --output-dir report/",
        arguments=_report_arguments,
        run=_report,
    ),
)


def build_parser(prog: str = PROG, *, only: str | None = None) -> argparse.ArgumentParser:
    """The ``deermem eval`` parser with one subparser per command.

    Args:
        only: the first command-line word. When it names a command, that
            command's subparser is the only one built: argparse sends every
            later word to it, so the others could not be used, and building
            them (argparse formats each argument as it is added) would cost
            a few milliseconds of every start. Anything else (``--help``, a
            typo, ``None``) builds them all, for the listing and the
            "invalid choice" message.
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Reproduce the capacity-eviction evaluation: the LongMemEval pools of the original "
            "DeerMem study, the production capacity gate, confidence vs hybrid-v1."
        ),
        epilog=(
            "example:\n  deermem eval run-policy --dataset longmemeval_oracle.json "
            "--output-dir runs/policy\n\nThe dataset is never downloaded; see "
            "docs/evaluation.md for where to get it."
        ),
        formatter_class=_HelpFormatter,
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = [command for command in COMMANDS if command.name == only]
    for command in chosen or COMMANDS:
        sub = subparsers.add_parser(
            command.name,
            help=command.summary,
            description=command.description,
            epilog=f"example:\n  {command.example}",
            formatter_class=_HelpFormatter,
        )
        command.arguments(sub)
        sub.set_defaults(run=command.run, parser=sub, batch=command.batch)
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    """Run ``deermem eval`` and return its exit status.

    0 on success; 1 when deermem refuses (bad protocol, wrong dataset, results
    already present), with one line on stderr; 2 for usage errors.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(prog, only=arguments[0] if arguments else None)
    if not arguments:
        parser.print_help(sys.stderr)
        return 2
    try:
        args = parser.parse_args(arguments)
        if getattr(args, "dataset", False) is None:
            args.parser.error(f"--dataset is required (or set {DATASET_ENV})")
        with CyclicCollector(enabled=not args.batch):
            return int(args.run(args))
    except SystemExit as stop:  # argparse: --help (0) and usage errors (2)
        return stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 2
    except DeerMemError as error:
        _print_error(str(error))
        return 1
    except BrokenPipeError:  # `deermem eval ... | head`: stop quietly, as other tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as error:
        _print_error(f"{error.filename}: {error.strerror}" if error.filename else str(error))
        return 1
    except KeyboardInterrupt:
        return 130


class CyclicCollector:
    """Run a block with CPython's cyclic garbage collector on or off, then restore it.

    Reference counting frees everything these commands drop; the cyclic
    collector only adds walks over every young container — parsing the 15 MB
    dataset alone makes some 30,000 of them, importing the modules more — and
    finds nothing to free: the documents, rows and decisions hold no cycles.
    Pausing it takes about a tenth off ``validate`` and ``run-policy``. The
    previous state is restored on the way out, so a caller in a long-lived
    process (a test run, a notebook) keeps its collector. (A class rather
    than :func:`contextlib.contextmanager`: this module must import fast.)
    """

    def __init__(self, *, enabled: bool) -> None:
        self._enabled = enabled
        self._was_enabled = gc.isenabled()

    def __enter__(self) -> None:
        self._was_enabled = gc.isenabled()
        if self._enabled:
            gc.enable()
        else:
            gc.disable()

    def __exit__(self, *_: object) -> None:
        if self._was_enabled:
            gc.enable()
        else:
            gc.disable()


def print_retention(table: RetentionTable, stream: TextIO) -> None:
    """Print a retention table: rich on a terminal, aligned plain text otherwise."""
    from deermem.evaluation.retention import format_plain, short_policy

    if not stream.isatty():
        stream.write(format_plain(table))
        return
    from rich import box  # costs ~0.2 s: only for a terminal
    from rich.console import Console
    from rich.table import Table

    rich_table = Table(
        title="Support fact retained (cases kept / cases)",
        caption=f"{table.legend}; protocol {table.protocol_id}",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    rich_table.add_column("scenario")
    rich_table.add_column("n", justify="right")
    for capacity, policy in table.columns:
        rich_table.add_column(f"cap {capacity}\n{short_policy(policy)}", justify="right")
    for row, following in zip(table.rows, (*table.rows[1:], None), strict=True):
        rich_table.add_row(
            row.label,
            str(row.cases),
            *table.values(row),
            style="bold" if row.is_total else None,
            end_section=row.is_total or (following is not None and following.suite != row.suite),
        )
    Console(file=stream, highlight=False).print(rich_table)


def _print_error(message: str) -> None:
    label = "\x1b[1;31merror:\x1b[0m" if sys.stderr.isatty() else "error:"
    print(f"{label} {message}", file=sys.stderr)
