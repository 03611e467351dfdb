"""The dependencies' floor under the start-up targets: their work, without deermem.

``bench_startup`` times this script beside the real commands. It does what
the command needs from typer, pydantic, PyYAML and rich — and nothing of
deermem's own (it imports no ``deermem`` module) — so its time is a lower
bound: what the command would cost if deermem's code took no time at all.

* ``startup_floor.py facts-list ROOT``: a typer app with the root options of
  ``deermem`` and a ``facts list`` command with its options; a pydantic model
  the size of ``MemoryConfig`` (39 fields, one of them a 15-field section, the
  numbers guarded by a validator) built and validated once; the front matter
  of every ``*.md`` file under ``ROOT`` read with PyYAML's C loader; and the
  same rich table ``deermem facts list`` prints, to standard output.
* ``startup_floor.py memory``: pydantic with that model, and PyYAML — what
  ``import deermem; deermem.Memory`` needs from its dependencies.
* ``startup_floor.py mcp``: a bare ``mcp`` SDK server with one tool over
  stdio — what ``deermem mcp`` is compared with (``bench_mcp --startups``).

Each mode imports only what it uses.

Run by path (``python bench/startup_floor.py``), without ``-m``: the floor
then leaves out even ``runpy``, which ``python -m deermem`` imports.
"""

import sys
from pathlib import Path
from typing import Annotated, Any

MEMORY_FIELDS = 39
SECTION_FIELDS = 15


def _number(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError("expected a number")
    return value


def build_config() -> None:
    """A frozen, strict model shaped like ``MemoryConfig``, validated once."""
    from pydantic import BeforeValidator, ConfigDict, Field, create_model

    config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
    number = Annotated[int, BeforeValidator(_number), Field(ge=0, le=1_000_000)]
    numbers: dict[str, Any] = {
        f"setting_{index}": (number, index) for index in range(SECTION_FIELDS)
    }
    section = create_model("Section", __config__=config, **numbers)
    fields: dict[str, Any] = {
        f"setting_{index}": (number, index) for index in range(MEMORY_FIELDS - 1)
    }
    fields["section"] = (section, section())
    create_model("Config", __config__=config, **fields)()


def facts_list() -> None:
    import typer
    import yaml
    from rich import box
    from rich.console import Console
    from rich.table import Table

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    facts = typer.Typer()
    app.add_typer(facts, name="facts")

    @app.callback()
    def root(
        ctx: typer.Context,
        root: Path | None = typer.Option(None, "--root", file_okay=False),
        config: Path | None = typer.Option(None, "--config", exists=True, dir_okay=False),
        user: str | None = typer.Option(None, "--user", envvar="DEERMEM_USER"),
        agent: str | None = typer.Option(None, "--agent", envvar="DEERMEM_AGENT"),
        version: bool = typer.Option(False, "--version", is_eager=True),
    ) -> None:
        ctx.obj = root

    @facts.command("list")
    def list_facts(
        ctx: typer.Context,
        category: str | None = typer.Option(None, "--category", "-c"),
        limit: int = typer.Option(0, "--limit", "-n", min=0),
        as_json: bool = typer.Option(False, "--json"),
    ) -> None:
        build_config()
        rows = []
        for path in sorted(Path(ctx.find_root().obj).rglob("*.md")):
            _, head, body = path.read_text(encoding="utf-8").split("---\n", 2)
            front = yaml.load(head, Loader=yaml.CSafeLoader)
            rows.append((front, body.strip().splitlines()[0].lstrip("# ")))
        table = Table(
            title=f"{len(rows)} facts", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False
        )
        for column in ("id", "category", "conf.", "created", "content"):
            table.add_column(column, no_wrap=column != "content", overflow="fold")
        for front, content in rows:
            table.add_row(
                str(front["id"]),
                str(front["category"]),
                f"{front['confidence']:.2f}",
                str(front["createdAt"])[:10],
                content[:70],
            )
        Console(highlight=False, soft_wrap=True).print(table)

    app(args=sys.argv[2:], prog_name="deermem")


def mcp_server() -> None:
    """The MCP SDK's server with one tool, over stdio until the client leaves."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("floor")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text."""
        return text

    server.run("stdio")


def main() -> None:
    if sys.argv[1:2] == ["memory"]:
        import yaml  # noqa: F401  (what deermem.Memory imports besides pydantic)

        build_config()
    elif sys.argv[1:2] == ["mcp"]:
        mcp_server()
    elif sys.argv[1:2] == ["facts-list"]:
        facts_list()
    else:
        raise SystemExit("usage: startup_floor.py memory | mcp | facts-list --root ROOT facts list")


if __name__ == "__main__":
    main()
