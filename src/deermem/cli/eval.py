"""``deermem eval``: the evaluation's commands, a typer sub-app mounted on ``deermem``.

Each command parses its options, calls the evaluation (:mod:`deermem.eval`),
and prints: JSON for scripts (``--json``), plain text or a rich table for
people. Progress goes to stderr — a bar on a terminal, one plain line per
finished call elsewhere, so a log holds no control codes.

Exit status: 0 on success; 1 when deermem refuses (bad protocol, wrong
dataset, results already present), with the reason on stderr; 2 for usage
errors.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from deermem.cli.output import err_console, escape, out_console, print_json
from deermem.cli.progress import progress_bar
from deermem.eval import (
    CHARTS_EXTRA,
    PROVIDER_LOCAL,
    PROVIDER_OPENAI_COMPATIBLE,
    missing_chart_module,
)
from deermem.eval.published import DEFAULT_PUBLISHED, PUBLISHED
from deermem.policy import POLICIES

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from deermem.eval.policy_run import RetentionTable
    from deermem.eval.protocol import Protocol
    from deermem.eval.qa import AnswerOutcome
    from deermem.eval.replay import CellRun

# The commands import the evaluation when they run: this module loads with any
# `deermem eval` command (deermem.cli.app imports it for those only), and
# `deermem eval --help` takes 0.72× the CPU without the whole evaluation stack.

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


DATASET_ENV: Final = "LONGMEMEVAL_ORACLE_PATH"
_PROTOCOL_PANEL: Final = "Protocol bundle (default: deermem's own, shipped with the package)"


def _bundle_file_option(flag: str, metavar: str, help: str) -> Any:
    """An option naming one file of the protocol bundle (default: the shipped one)."""
    return typer.Option(None, flag, metavar=metavar, help=help, rich_help_panel=_PROTOCOL_PANEL)


CONFIG_OPTION: Final = _bundle_file_option(
    "--config", "YAML", "Protocol config [default: the bundled pr4789-reproduction-v1.yaml]."
)
OFFICIAL_MANIFEST_OPTION: Final = _bundle_file_option(
    "--official-manifest",
    "JSON",
    "The 40 pinned LongMemEval ids [default: the bundled official-pr4789-v1.json].",
)
SYNTHETIC_MANIFEST_OPTION: Final = _bundle_file_option(
    "--synthetic-manifest",
    "JSON",
    "The 5 correction cases [default: the bundled synthetic-corrections-v1.json].",
)
DATASET_OPTION: Final = typer.Option(
    None,
    "--dataset",
    metavar="FILE",
    envvar=DATASET_ENV,
    show_envvar=True,
    help="The LongMemEval oracle file; checked by SHA-256 before it is read.",
)
JSON_OPTION: Final = typer.Option(False, "--json", help="Print machine-readable JSON.")


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


# --- the commands ---------------------------------------------------------------------------------


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
                "artifacts": protocol.artifacts._asdict(),
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
    # The evaluation stack loads with its command only (`deermem eval --help` 0.72×).
    from deermem.eval.dataset import build_cases, load_dataset

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
                "official_cases": len(protocol.official.question_ids),  # a case each, built above
                "synthetic_cases": len(protocol.synthetic.cases),
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
    facts each policy kept. Existing result files are never overwritten; what a
    killed run-policy left (the files without run.json, written last) is replaced.
    """
    # The evaluation stack loads with its command only (`deermem eval --help` 0.72×).
    from deermem.eval.policy_run import policy_summary, retention_table, run_and_write

    path = require_dataset(ctx, dataset)
    protocol = load_named_protocol(config, official_manifest, synthetic_manifest)
    outcomes = run_and_write(protocol, path, output_dir)
    typer.echo(f"wrote {len(outcomes)} policy rows for {protocol.case_count} cases to {output_dir}")
    print_retention(retention_table(policy_summary(protocol.protocol_id, outcomes)), sys.stdout)


@app.command(
    "run-qa",
    short_help="Ask the model every question under both policies (resumable).",
    epilog=RUN_QA_EXAMPLES,
)
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
    # The evaluation stack loads with its command only (`deermem eval --help` 0.72×).
    from deermem.eval import answerers, qa

    path = require_dataset(ctx, dataset)
    if provider is not Provider.LOCAL and model_path is not None:
        ctx.fail("--model-path applies to --provider local only")
    protocol = load_named_protocol(config, official_manifest, synthetic_manifest)
    answerer = answerers.answerer_for(  # the endpoint's variables, before the dataset
        protocol.config.qa,
        provider,
        environ=os.environ,
        model_path=model_path,
        sleep=lambda seconds: retry_sleep(seconds),
    )
    try:
        with AnswerProgress(model=answerer.model) as shown:
            summary = qa.run_qa(
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


@app.command(
    "grade-qa",
    short_help="Check every stored answer against the protocol, grade, write the report.",
    epilog="Example: `deermem eval grade-qa --dataset longmemeval_oracle.json "
    "--output-dir runs/qa`",
)
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
    qa.stats.json (McNemar and paired bootstrap per suite), qa.stats.json last:
    graded results are never overwritten, but what a killed grading left
    (the files without qa.stats.json) is replaced. No network; the same run
    gives the same bytes.
    """
    # The evaluation stack loads with its command only (`deermem eval --help` 0.72×).
    from deermem.eval import qa

    path = require_dataset(ctx, dataset)
    protocol = load_named_protocol(config, official_manifest, synthetic_manifest)
    report = qa.grade_qa(protocol, path, output_dir)
    first, second = POLICIES
    for suite, comparison in report.comparisons.items():  # the suites, in report order
        cases = comparison.cases
        typer.echo(
            f"{suite}: {first} {comparison.first_correct}/{cases}, "
            f"{second} {comparison.second_correct}/{cases}, "
            f"exact McNemar p={comparison.mcnemar.p_value:.6f}"
        )
    typer.echo(f"graded {len(report.rows)} rows to {output_dir}")


@app.command(
    "verify",
    short_help="Re-derive a published QA report from its rows and compare byte for byte.",
    epilog=VERIFY_EXAMPLES,
)
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
    # The evaluation stack loads with its command only (`deermem eval --help` 0.72×).
    from deermem.eval.verify import (
        RESULT_FILES,
        protocol_parameters,
        render_verification,
        verify_results,
    )

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
    parameters = None  # the reproduction protocol's
    if config is not None:
        parameters = protocol_parameters(config)
    report = verify_results(results_dir, parameters=parameters, expected_sha256=expected)
    if as_json:
        print_json(report.model_dump())
    else:
        typer.echo(render_verification(report), nl=False)
    if not report.ok:
        raise typer.Exit(1)


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
    config: Path | None = typer.Option(
        None,
        "--config",
        metavar="YAML",
        help=(
            "Verify QA results with the bootstrap seed, iterations and alpha of this protocol "
            "config [default: 4789, 10000, 0.05, as every bundled protocol]."
        ),
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
    # The evaluation stack loads with its command only (`deermem eval --help` 0.72×).
    from deermem.eval.report import write_report

    missing = missing_chart_module()
    written = [
        str(path)
        for path in write_report(run_dir, output_dir=output_dir, charts=not missing, config=config)
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


@app.command("replay")
def replay(
    params: Path | None = typer.Option(
        None,
        "--params",
        exists=True,
        dir_okay=False,
        help="A workload parameters file [default: the bundled replay-params.yaml].",
    ),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="The parameters' quick section, for a first look: seconds with the scratch "
        "stores in memory (the default where /dev/shm exists), about a minute on a disk.",
    ),
    output_dir: Path | None = typer.Option(
        None,
        "--output-dir",
        file_okay=False,
        help="Write replay.json, replay.md and (with the eval extra) replay.png here.",
    ),
    workdir: Path | None = typer.Option(
        None,
        "--workdir",
        file_okay=False,
        exists=True,
        help="Where the scratch stores go [default: /dev/shm (memory-backed) when it exists, "
        "else the temporary directory]. On an ordinary disk every commit waits for "
        "fsync: the run takes about ten times as long; the results are the same.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results document."),
) -> None:
    """Replay seeded synthetic traffic through the real memory under both policies.

    Users talk to an agent for simulated months; some facts are needed again
    later (the hidden ground truth), with noisy confirmations and searches,
    corrections and bursts over the cap. Each seed is replayed under
    `confidence` and `hybrid-v1` at every cap; the results give the needed
    facts' retention at the time of need, regret events by kind, and the
    difference between the policies with a bootstrap interval over seeds.
    The same parameters give byte-identical results (see docs/regret.md).

    Example: `deermem eval replay --quick`, `deermem eval replay --output-dir replay`
    """
    from deermem.eval.replay import (  # the evaluation stack (eval --help 0.72×)
        encode_results,
        ensure_new_results,
        load_params,
        render_markdown,
        replay_all,
        summarize,
        write_results,
    )

    loaded = load_params(params)
    if quick:
        loaded = type(loaded)(loaded.params.quickened(), loaded.source, loaded.sha256)
    if output_dir is not None:  # refused before the replay runs, not after
        ensure_new_results(output_dir)
    started = time.perf_counter()
    total = loaded.params.seeds * len(loaded.params.caps) * 2

    def progress(run: CellRun) -> None:
        err_console.print(
            f"seed {run.seed} {run.policy} cap {run.cap}: "
            f"{run.retained}/{run.needs} needed facts retained",
            highlight=False,
        )

    runs = replay_all(loaded.params, workdir, progress=progress)
    results = summarize(runs, loaded)
    err_console.print(f"replayed {total} cells in {time.perf_counter() - started:.0f} s")
    markdown = render_markdown(results)
    if output_dir is not None:
        missing = write_results(output_dir, results)
        if missing is not None:
            err_console.print(f"no chart: it needs {escape(missing)} ({escape(CHARTS_EXTRA)})")
        err_console.print(f"results written to {output_dir}")
    if as_json:
        typer.echo(encode_results(results).decode(), nl=False)
    else:
        out_console.print(markdown, markup=False, highlight=False)


# --- helpers --------------------------------------------------------------------------------------


def load_named_protocol(
    config: Path | None, official_manifest: Path | None, synthetic_manifest: Path | None
) -> Protocol:
    """Load the protocol the command line names; deermem's own files for the rest.

    Raises:
        ProtocolError: a file is missing, invalid, or disagrees with another.
    """
    # The evaluation stack loads with its command only (`deermem eval --help` 0.72×).
    from deermem.eval.protocol import ProtocolFiles, bundled_protocol_files, load_protocol

    bundled = bundled_protocol_files()
    return load_protocol(
        ProtocolFiles(
            config=config or bundled.config,
            official_manifest=official_manifest or bundled.official_manifest,
            synthetic_manifest=synthetic_manifest or bundled.synthetic_manifest,
        )
    )


def require_dataset(ctx: typer.Context, dataset: Path | None) -> Path:
    """The dataset option's value; a usage error (status 2) when it is neither given nor set."""
    if dataset is None:
        ctx.fail(f"--dataset is required (or set {DATASET_ENV})")
    return dataset


def print_retention(table: RetentionTable, stream: TextIO) -> None:
    """Print a retention table: rich on a terminal, aligned plain text otherwise.

    Piped output (a log, CI, ``| grep``) gets the plain table, which holds the
    same lines without box drawing or control codes.
    """
    if not stream.isatty():
        stream.write(table.plain())
        return
    rich_table = Table(
        title="Support fact retained (cases kept / cases)",
        caption=f"{table.legend}; protocol {table.protocol_id}",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    rich_table.add_column("scenario")
    rich_table.add_column("n", justify="right")
    for capacity, policy in table.columns:
        rich_table.add_column(table.heading(capacity, policy), justify="right")
    for row, following in zip(table.rows, (*table.rows[1:], None), strict=True):
        rich_table.add_row(
            row.label,
            str(row.cases),
            *table.values(row),
            style="bold" if row.is_total else None,
            end_section=row.is_total or (following is not None and following.suite != row.suite),
        )
    Console(file=stream, highlight=False).print(rich_table)


class AnswerProgress:
    """Shows how far a ``run-qa`` has got, on standard error.

    A terminal gets the command line's one progress bar
    (:func:`~deermem.cli.progress.progress_bar`); a run in CI or with its
    output redirected gets one line when the calls start and one per finished
    call, so a log holds no control codes. Use it as a context manager; pass
    :meth:`start` and :meth:`advance` to :func:`deermem.eval.qa.run_qa`.
    """

    def __init__(self, *, model: str) -> None:
        self._model = model
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._total = 0
        self._done = 0

    def __enter__(self) -> AnswerProgress:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def start(self, pending: int, reused: int) -> None:
        """Called once the tasks are known: ``pending`` to call, ``reused`` kept."""
        self._total = pending
        if not pending:
            return
        if sys.stderr.isatty():
            self._bar = progress_bar(f"answering with {escape(self._model)}", quiet=False)
            self._bar.start()
            self._task = self._bar.add_task("answering", total=pending)
            return
        sys.stderr.write(
            f"answering {pending} questions with {self._model} ({reused} stored answers reused)\n"
        )
        sys.stderr.flush()

    def advance(self, outcome: AnswerOutcome) -> None:
        """Called once per finished call."""
        self._done += 1
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task)
            if outcome.error is not None:
                self._bar.console.print(f"[red]failed[/red] {escape(outcome.task.row_id)}")
            return
        status = "answered" if outcome.error is None else "failed"
        width = len(str(self._total))
        sys.stderr.write(f"[{self._done:>{width}}/{self._total}] {outcome.task.row_id} {status}\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
