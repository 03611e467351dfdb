"""``deermem migrate``: copy a memory from one store to another, and verify the copy."""

from __future__ import annotations

import typer
from rich.markup import escape

from deermem.cli._output import JSON_OPTION, out_console, print_json, progress_bar
from deermem.cli.db_cmd import config_of

__all__ = ["migrate_command"]


def migrate_command(
    ctx: typer.Context,
    source: str = typer.Option(
        ..., "--from", metavar="SRC", help="A Markdown store directory or a postgresql:// URL."
    ),
    destination: str = typer.Option(
        ..., "--to", metavar="DST", help="A Markdown store directory or a postgresql:// URL."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Copy every user's memory from SRC to DST and verify each copy.

    Everything is copied: facts, summaries (with their revision), recall
    counts, receipts, the archive, the conversations' marks, regret events
    and shadow marks. Each user is written in one atomic step and read back
    and compared with the source. Secrets are replaced by `[redacted: KIND]`
    on the way (`redact_secrets`, docs/privacy.md); SRC keeps them.
    A user DST already holds identically is skipped, so an interrupted
    migration can be run again; one it holds with other data stops the
    migration before anything is copied. SRC is never changed. A database
    must be migrated first (`deermem db upgrade`).

    Example: `deermem migrate --from ~/.deermem --to postgresql://deermem@db/deermem`
    """
    from deermem.store.migrate import MigrationReport, migrate, opened_location

    config = config_of(ctx)
    with (
        opened_location(source, config, must_exist=True) as (reader, shown_source),
        opened_location(destination, config, must_exist=False) as (writer, shown_destination),
    ):
        if shown_source == shown_destination:
            raise typer.BadParameter("SRC and DST are the same store", param_hint="--to")
        report = MigrationReport(shown_source, shown_destination)
        progress = progress_bar("copying users", quiet=as_json)
        with progress:
            task = progress.add_task("users", total=None)
            migrate(
                reader,
                writer,
                report,
                progress=lambda done, total: progress.update(task, completed=done, total=total),
                redact_secrets=config.redact_secrets,
            )
    if as_json:
        print_json(report.to_dict())
        return
    counts = ", ".join(f"{value} {key}" for key, value in sorted(report.counts.items()))
    out_console.print(
        f"copied {report.copied} user(s) from {escape(report.source)} to "
        f"{escape(report.destination)}, each verified"
        + (f" ({escape(counts)})" if counts else "")
        + (f"; {report.skipped} already there, identical" if report.skipped else "")
        + (f"; secrets redacted: {', '.join(sorted(report.redacted))}" if report.redacted else "")
    )
