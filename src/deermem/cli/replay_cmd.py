"""``deermem eval replay``: both capacity policies on months of seeded synthetic traffic."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from deermem.cli.output import err_console, out_console

if TYPE_CHECKING:
    from deermem.eval.replay.run import CellRun

__all__ = ["RESULT_FILES", "replay"]

RESULT_FILES = ("replay.json", "replay.md", "replay.png")


def replay(
    params: Path | None = typer.Option(
        None,
        "--params",
        exists=True,
        dir_okay=False,
        help="A workload parameters file [default: the bundled params.yaml].",
    ),
    quick: bool = typer.Option(
        False, "--quick", help="The parameters' quick section: a run of seconds, for a first look."
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
        help="Where the scratch stores go [default: the temporary directory]; "
        "/dev/shm makes the run several times faster and changes no result.",
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

    Example: `deermem eval replay --output-dir replay --workdir /dev/shm`
    """
    # The replay drives the whole memory stack: imported when it runs, so the
    # other `deermem eval` commands do not load it.
    from deermem.eval.errors import ResultsExistError
    from deermem.eval.replay import load_params
    from deermem.eval.replay.report import encode_results, render_chart, render_markdown, summarize
    from deermem.eval.replay.run import replay_all
    from deermem.eval.report.png import CHARTS_EXTRA, missing_chart_module
    from deermem.store.markdown.atomic import atomic_write

    loaded = load_params(params)
    if quick:
        loaded = type(loaded)(loaded.params.quickened(), loaded.source, loaded.sha256)
    if output_dir is not None:
        present = [output_dir / name for name in RESULT_FILES if (output_dir / name).exists()]
        if present:
            raise ResultsExistError([str(path) for path in present])
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
        output_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(output_dir / "replay.json", encode_results(results))
        atomic_write(output_dir / "replay.md", markdown.encode())
        missing = missing_chart_module()
        if missing is None:
            atomic_write(output_dir / "replay.png", render_chart(results))
        else:
            err_console.print(f"no chart: it needs {escape(missing)} ({escape(CHARTS_EXTRA)})")
        err_console.print(f"results written to {output_dir}")
    if as_json:
        typer.echo(encode_results(results).decode(), nl=False)
    else:
        out_console.print(markdown, markup=False, highlight=False)
