"""Learning from conversations: ``deermem ingest`` (one update from a conversation
file) and ``deermem model check`` (does the configured model answer)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from deermem.cli.output import (
    JSON_OPTION,
    cli_context,
    err_console,
    escape,
    memory_of,
    out_console,
    print_json,
)
from deermem.config import load_config, resolve_config
from deermem.errors import ConversationFileError, FactValidationError, MessageFormatError
from deermem.model import check_thread_id, parse_json
from deermem.store.markdown.files import read_regular_file

if TYPE_CHECKING:
    from deermem.learning.report import FactChange, UpdateReport, UpdateResult
    from deermem.model import Fact

__all__ = ["ingest", "model_app", "render_update"]

_DEFAULT_PROMPT = "Reply with the single word: ready"
_SHOWN_ANSWER = 500

EXIT_ANSWER_UNUSABLE = 3
"""``deermem ingest``'s status when the model answered but nothing in the answer
could be used (see :attr:`UpdateReport.answer_unusable`): distinct from 1 (an
error: no answer at all, a bad file, bad configuration) and 2 (usage), so a
script can retry, or look at the model, without parsing output."""

_PREVIEW = 90
_NO_UPDATE = {
    "empty": "the model's answer was empty",
    "too-large": "the model's answer was too large to read",
    "no-update-object": "the model's answer held no memory update (no JSON object with "
    "user, history and newFacts)",
    "scan-limit": "no memory update was found within the parser's limits",
}
_REFUSED = {
    "removals-with-malformed-facts": "it removed facts while some new facts were malformed",
    "wrong-field-types": "none of user, history, newFacts and the other lists has the right type",
}


def read_conversation(path: Path) -> tuple[str | None, list[object]]:
    """The thread id (if the file names one) and the messages of a conversation file.

    The file is JSON: a list of messages, or ``{"thread_id": ..., "messages": [...]}``.

    Raises:
        ConversationFileError: the file is missing, not JSON, or not of that shape.
    """
    shown = str(path)
    try:
        raw = read_regular_file(path)
    except FileNotFoundError:
        raise ConversationFileError(shown, "no such file") from None
    except IsADirectoryError:
        raise ConversationFileError(shown, "is a directory, not a conversation file") from None
    try:
        data = parse_json(raw)
    except json.JSONDecodeError as error:
        raise ConversationFileError(
            shown, f"invalid JSON: {error.msg}", line=error.lineno, column=error.colno
        ) from None
    except UnicodeDecodeError:
        raise ConversationFileError(shown, "not UTF-8 text") from None
    if isinstance(data, list):
        return None, data
    if isinstance(data, Mapping) and isinstance(data.get("messages"), list):
        thread = data.get("thread_id")
        if thread is not None:
            try:
                thread = check_thread_id(thread)  # the rule of every interface
            except FactValidationError as refused:
                raise ConversationFileError(shown, f"'thread_id': {refused.allowed}") from None
        return thread, data["messages"]
    raise ConversationFileError(
        shown, 'expected a list of messages, or {"thread_id": ..., "messages": [...]}'
    )


def _thread(value: str | None) -> str | None:
    """``--thread``, held to the one rule for a thread id: a usage error, as HTTP's 422.

    An empty ``--thread ''`` is refused like any other bad id, never read as "not given".
    """
    if value is None:
        return None
    try:
        return check_thread_id(value)
    except FactValidationError as refused:
        raise typer.BadParameter(refused.allowed) from None


def ingest(
    ctx: typer.Context,
    file: Path = typer.Argument(..., metavar="FILE", help="A JSON conversation file."),
    thread: str | None = typer.Option(
        None,
        "--thread",
        callback=_thread,
        help="Thread id: one line of 1 to 256 characters, not only spaces "
        "[default: the file's thread_id, else its name].",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would change; write nothing."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Turn a conversation into facts, confirmations and removals (one model call).

    FILE holds the conversation in OpenAI chat format: a list of
    `{"role": "user" | "assistant", "content": ...}` messages, or
    `{"thread_id": "...", "messages": [...]}`. The model configured under
    `model:` reads it with the current memory; what it proposes passes the
    label gate, the confirmation rule, the staleness review and the capacity
    gate, and is committed at once with receipts. `--dry-run` shows the
    same change set and writes nothing. Needs a model: see docs/llm.md.
    Only the newest messages that fit `max_conversation_chars` are sent; the
    output says how many older ones were left out.

    Exit status:

    * 0: the update ran: applied, nothing changed, or nothing to learn from;
    * 1: an error: a bad file or configuration, no model configured, the
      model call failed (after its retries), the store refused;
    * 2: a usage error (unknown option, missing FILE);
    * 3: the model answered, but its answer was unusable: no memory update in
      it (empty, not JSON, too large, cut off at `model.max_tokens`) or refused
      whole. Nothing was written; ingesting the file again retries.

    Example: `deermem --config deermem.yaml --user alice ingest examples/conversation.json`
    """
    file_thread, messages = read_conversation(file)
    thread_id = thread if thread is not None else file_thread or file.stem
    memory = memory_of(ctx)
    try:
        with err_console.status("asking the model what to remember ..."):
            result = memory.learn(thread_id, messages, dry_run=dry_run)
    except MessageFormatError as error:
        raise ConversationFileError(str(file), str(error)) from None
    finally:
        memory.close()  # the model's connections
    if as_json:
        print_json(
            {
                "report": result.report.to_dict(),
                "facts": {fact_id: fact.to_dict() for fact_id, fact in result.facts.items()},
            }
        )
    else:
        render_update(result, str(memory.scope), memory.config.max_conversation_chars)
    if result.report.answer_unusable:
        raise typer.Exit(EXIT_ANSWER_UNUSABLE)


def render_update(result: UpdateResult, scope: str, max_conversation_chars: int) -> None:
    """Print what a conversation changed (`deermem ingest`, `deermem demo --learn`)."""
    report = result.report
    head = "dry run, nothing written" if report.dry_run else "committed"
    if report.outcome in ("applied", "unchanged"):
        counts = report.counts()
        summary = ", ".join(
            f"{counts[name]} {name}" for name in ("added", "confirmed", "removed", "evicted")
        )
        state = head if report.outcome == "applied" else "nothing changed"
        out_console.print(
            f"thread [bold]{escape(report.thread_id)}[/], {escape(scope)}: {summary} ({state})"
        )
    else:
        out_console.print(_not_applied(report))
    if report.messages_left_out:
        out_console.print(
            f"  [yellow]sent the newest {report.messages_sent:,} message(s); the "
            f"{report.messages_left_out:,} older one(s) were left out "
            f"(max_conversation_chars = {max_conversation_chars:,})[/]"
        )
    if report.signals:
        out_console.print(f"  signals: {', '.join(report.signals)}")
    if report.redacted:
        out_console.print(
            escape(
                f"  secrets redacted before the model saw them or anything was written: "
                f"{', '.join(report.redacted)} (stored as [redacted: KIND])"
            )
        )
    for line in _change_lines(report, result.facts):
        out_console.print(line)
    if report.rejected or report.metrics.duplicate_facts:
        m = report.metrics
        out_console.print(
            f"  [dim]not stored: {m.rejected_by_scope_gate} by the label gate, "
            f"{m.rejected_low_confidence} below the confidence threshold, "
            f"{m.malformed_new_facts} malformed, {m.duplicate_facts} duplicate(s)[/]"
        )
    if report.over_limits.total:
        dropped = ", ".join(
            f"{count} {name} past the first {limit}"
            if unit == "entries"
            else f"{count} × {name} longer than {limit:,} {unit}"
            for name, count, limit, unit in report.over_limits.items()
        )
        out_console.print(f"  [yellow]dropped over the answer's limits: {dropped}[/]")
    if report.model_call is not None and report.model_call.truncated:
        out_console.print(
            "  [yellow]the answer was cut off at the token limit (model.max_tokens)[/]"
        )


def _not_applied(report: UpdateReport) -> str:
    thread = escape(report.thread_id)
    if report.outcome == "no-conversation":
        return (
            f"thread {thread}: nothing to learn from (no user turn with an assistant reply "
            "left after filtering); no model call"
        )
    if report.outcome == "nothing-new":
        return f"thread {thread}: every message was already extracted; no model call"
    if report.outcome == "rejected":
        why = _REFUSED.get(report.detail or "", report.detail or "")
        return f"thread {thread}: the answer was refused whole ({escape(why)}); nothing changed"
    reason = _NO_UPDATE.get(report.detail or "", report.detail or "no update")
    return f"thread {thread}: no update: {escape(reason)}; nothing changed"


def _change_lines(report: UpdateReport, facts: Mapping[str, Fact]) -> list[str]:
    lines = [f"  [green]+ added[/]     {_fact(i, facts)}" for i in report.added]
    lines += [f"  [cyan]✓ confirmed[/] {_fact(i, facts)}" for i in report.confirmed]
    lines += [f"  [cyan]↻ extended[/]  {_fact(i, facts)}" for i in report.extended]
    lines += [f"  [yellow]- removed[/]   {_left(c, facts)}" for c in report.removed]
    lines += [f"  [red]⇣ evicted[/]   {_left(c, facts)}" for c in report.evicted]
    lines += [
        f"  [dim]kept (its replacement was not stored): {_fact(i, facts)}[/]"
        for i in report.blocked_removals
    ]
    if report.summaries:
        lines.append(f"  summaries updated: {', '.join(report.summaries)}")
    return lines


def _fact(fact_id: str, facts: Mapping[str, Fact]) -> str:
    fact = facts.get(fact_id)
    if fact is None:
        return fact_id
    text = fact.content if len(fact.content) <= _PREVIEW else fact.content[: _PREVIEW - 1] + "…"
    category = fact.categoryExtension or fact.category
    return f"{fact_id} [dim]{escape(category)} {fact.confidence:.2f}[/] {escape(text)}"


def _left(change: FactChange, facts: Mapping[str, Fact]) -> str:
    receipt = f", receipt {change.receipt_id}" if change.receipt_id else ""
    return f"{_fact(change.fact_id, facts)} [dim]({change.reason}{receipt})[/]"


# --- the model ---------------------------------------------------------------------------

model_app = typer.Typer(help="Check the language model used for extraction.", no_args_is_help=True)


@model_app.command("check")
def check(
    ctx: typer.Context,
    file: Path | None = typer.Argument(
        None,
        exists=True,
        dir_okay=False,
        readable=True,
        help="A .toml, .yaml or .yml configuration with a `model:` section.",
    ),
    prompt: str = typer.Option(_DEFAULT_PROMPT, "--prompt", help="What to ask the model."),
    ignore_env: bool = typer.Option(
        False, "--ignore-env", help="Do not apply DEERMEM_* environment variables."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Send one short request to the configured model and show what came back.

    Reads the `model:` section (FILE, then `DEERMEM_MODEL__*` variables; without
    FILE, the configuration every other command uses: the store's `deermem.yaml`,
    `--config`, the variables), builds
    the client extraction would use, and asks it PROMPT once, with the configured
    retries and timeout. Prints the model that answered, the time taken, the
    token usage and the answer; a failure is one line naming the model, the
    endpoint and what went wrong. The API key is never printed.

    Example: `DEEPSEEK_API_KEY=... deermem model check deermem.yaml`
    """
    # The HTTP client (httpx) loads with this command only: +15 % on facts list otherwise.
    from deermem.llm import ChatMessage, OpenAICompatibleModel, require_chat_model

    if file is None:
        state = cli_context(ctx)
        root = None if state.uses_database() else state.store_root()
        config = resolve_config(
            state.config_file, root=root, environ={} if ignore_env else None
        ).config
    else:
        config = load_config(file, environ={} if ignore_env else None)
    model = require_chat_model(config)
    endpoint = model.endpoint if isinstance(model, OpenAICompatibleModel) else None
    try:
        with err_console.status(f"asking {escape(model.name)} ...", spinner="dots"):
            started = time.perf_counter()
            response = model.complete([ChatMessage.user(prompt)])
            elapsed_ms = (time.perf_counter() - started) * 1000
    finally:
        if isinstance(model, OpenAICompatibleModel):
            model.close()
    report = {
        "provider": config.model.provider,
        "model": model.name,
        "endpoint": endpoint,
        "reportedModel": response.model,
        "attempts": response.attempts,
        "elapsedMs": round(elapsed_ms, 1),
        "finishReason": response.finish_reason,
        "usage": dict(response.usage.counts),
        "answer": response.text,
    }
    if as_json:
        print_json(report)
        return
    answer = response.text.strip()
    if len(answer) > _SHOWN_ANSWER:
        answer = answer[: _SHOWN_ANSWER - 3] + "..."
    where = f" at {endpoint}" if endpoint else " (local)"
    out_console.print(f"[green]ok[/]  {escape(model.name)}{escape(where)}")
    out_console.print(
        f"    answered in {elapsed_ms:.0f} ms after {response.attempts} attempt(s); "
        f"reported model: {escape(response.model or '-')}; "
        f"tokens: {_usage(response.usage.counts)}"
    )
    out_console.print(f"    answer: {escape(answer)}")


def _usage(counts: Mapping[str, int]) -> str:
    if not counts:
        return "not reported"
    prompt, completion = counts.get("prompt_tokens"), counts.get("completion_tokens")
    if prompt is None or completion is None:
        return ", ".join(f"{key} {value}" for key, value in counts.items())
    return f"{prompt} in, {completion} out"
