"""``deermem model``: check that the configured language model answers."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import typer
from rich.markup import escape

from deermem.cli._output import JSON_OPTION, err_console, out_console, print_json

__all__ = ["app"]

app = typer.Typer(help="Check the language model used for extraction.", no_args_is_help=True)

_DEFAULT_PROMPT = "Reply with the single word: ready"
_SHOWN_ANSWER = 500


@app.command("check")
def check(
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

    Reads the `model:` section (FILE, then `DEERMEM_MODEL__*` variables), builds
    the client extraction would use, and asks it PROMPT once, with the configured
    retries and timeout. Prints the model that answered, the time taken, the
    token usage and the answer; a failure is one line naming the model, the
    endpoint and what went wrong. The API key is never printed.

    Example: `DEEPSEEK_API_KEY=... deermem model check deermem.yaml`
    """
    from deermem.config import load_config
    from deermem.llm import ChatMessage, OpenAICompatibleModel, require_chat_model

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
