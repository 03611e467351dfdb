"""The reading half of the read-only tests, run in a process that may not write the store.

``python tests/readonly_reader.py ROOT`` reads the store at ROOT (user
``alice``) through the Python API and through the command line, and prints
one JSON object: what each read returned, the exit status and output of each
command, and the warnings logged. The test that runs it decides where it
runs: as an unprivileged user, or inside a read-only bind mount.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
from datetime import UTC, datetime

from deermem import DeerMemError, Memory
from deermem.cli.app import main

NOW = datetime(2026, 8, 13, tzinfo=UTC)
COMMANDS = {
    "list": ["facts", "list"],
    "show": ["facts", "show", "{active}"],
    "context": ["context"],
    "search": ["search", "fact"],
    "why": ["why", "{archived}"],
    "audit": ["audit"],
    "archive": ["archive", "list"],
    "export": ["export"],
    "scopes": ["scopes"],
}


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def api_reads(root: str) -> dict[str, object]:
    memory = Memory.open(root, user="alice", clock=lambda: NOW)
    facts = memory.list_facts()
    archived = memory.list_archived()
    return {
        "facts": [fact.id for fact in facts],
        "show": memory.get_fact(facts[0].id).content,
        "context": memory.context(),
        "search": [[hit.fact_id for hit in memory.search("fact")] for _ in range(3)],
        "why": memory.why(archived[0].fact_id).status,
        "audit": [receipt.receipt_id for receipt in memory.audit()],
        "archive": [entry.fact_id for entry in archived],
        "export": memory.export_document(),
    }


def cli_reads(root: str, ids: dict[str, str]) -> dict[str, object]:
    results: dict[str, object] = {}
    for name, command in COMMANDS.items():
        args = ["--root", root, "--user", "alice", *(part.format(**ids) for part in command)]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
        results[name] = {"code": code, "out": out.getvalue(), "err": err.getvalue()}
    return results


def run(root: str) -> dict[str, object]:
    warnings = Warnings()
    logging.getLogger("deermem").addHandler(warnings)
    report: dict[str, object] = {}
    try:
        api = api_reads(root)
    except DeerMemError as error:
        report["api_error"] = {"type": type(error).__name__, "message": str(error)}
        ids = {"active": "fact_x", "archived": "fact_x"}
    else:
        report["api"] = api
        ids = {"active": api["facts"][0], "archived": api["archive"][0]}  # type: ignore[index]
    report["cli"] = cli_reads(root, ids)
    report["warnings"] = warnings.messages
    return report


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1])))
