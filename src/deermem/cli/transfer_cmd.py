"""``deermem export`` and ``deermem import``: one scope as the lossless JSON document."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from deermem.cli._context import memory_of
from deermem.cli._output import JSON_OPTION, fail, out_console, print_json, read_stdin_text

__all__ = ["export", "import_"]

_STDIO = "-"


def export(
    ctx: typer.Context,
    file: str = typer.Argument(
        _STDIO, metavar="[FILE]", help="Where to write the document [default: - (standard output)]."
    ),
) -> None:
    """Write one user's and agent's memory as a JSON document.

    The document holds the summaries and every fact with every field
    (`lastConfirmedAt`, `confirmationCount`, unknown keys ...), so
    `deermem import` gives the same memory back. FILE is replaced
    atomically: it holds the old document or the new one, never half.

    Examples: `deermem --user alice export alice.json`,
    `deermem --user alice export | jq '.facts | length'`
    """
    document = memory_of(ctx, existing=True).export_document()
    try:
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # text that is no Unicode (a lone surrogate): escape it
        text = json.dumps(document, indent=2) + "\n"
        data = text.encode("ascii")
    if file == _STDIO:
        typer.echo(text, nl=False)
        return
    from deermem.store.markdown.files import atomic_write

    path = Path(file)
    if not path.parent.is_dir():
        fail(f"{file}: its directory does not exist")
    atomic_write(path, data)


def import_(
    ctx: typer.Context,
    file: str = typer.Argument(
        _STDIO, metavar="[FILE]", help="The document to read [default: - (standard input)]."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Replace one user's and agent's memory with a document's, through the capacity gate.

    The document is what `deermem export` writes (the original DeerMem's
    export shape works too). Its facts and summaries replace the memory's:
    facts it does not hold leave with reason `replaced`, to the archive
    (restorable) unless `eviction_mode` is `delete`. When the document holds
    more facts than the cap, the capacity gate decides what stays, as for
    every other way in; what it did is printed, with receipts in
    `deermem audit`. A fact whose id is in the archive is refused (restore
    or purge it first); nothing is imported then.

    Examples: `deermem --user alice import alice.json`,
    `deermem --user alice export | deermem --user bob import`
    """
    document = _parse(file)
    memory = memory_of(ctx)
    result = memory.import_document(document)
    if as_json:
        print_json(result.to_dict())
        return
    parts = [f"kept {len(result.kept)}"]
    if result.evicted:
        parts.append(f"evicted {len(result.evicted)} at capacity")
    if result.replaced:
        where = "to the archive" if memory.config.eviction_mode == "archive" else "deleted"
        parts.append(f"replaced {len(result.replaced)} not in the document ({where})")
    out_console.print(f"imported into {escape(str(memory.scope))}: {', '.join(parts)}")
    for fact_id in result.evicted:
        out_console.print(f"  evicted {fact_id} (see `deermem why {fact_id}`)")


def _parse(file: str) -> dict[str, object]:
    shown = "standard input" if file == _STDIO else file
    text = _read_document(file)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        fail(f"{shown} (line {error.lineno}, column {error.colno}): not JSON: {error.msg}")
    if not isinstance(document, dict):
        fail(f"{shown}: expected a JSON object with a 'facts' list, as `deermem export` writes")
    return document


def _read_document(file: str) -> str:
    if file == _STDIO:
        return read_stdin_text("the document")
    path = Path(file)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        fail(f"{file}: no such file")
    except IsADirectoryError:
        fail(f"{file}: is a directory, not a document")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        fail(f"{file}: not UTF-8 text (byte {error.start})")
