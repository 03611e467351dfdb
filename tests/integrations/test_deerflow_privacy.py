"""The DeerFlow backend never stores a secret: create, update, import and extraction (issue 26)."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import pytest

from deermem.model import marker
from deermem.testing import Reply, ScriptedChatServer
from tests.integrations.deerflow_support import backend, deerflow_turn
from tests.privacy.fakes import MAKERS
from tests.privacy.stored import files_text
from tests.wire_support import answer, new_fact


def test_every_write_of_the_backend_stores_markers_only(
    tmp_path: Path, server: ScriptedChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    rng = random.Random(2026)
    fakes = [make(rng) for make in MAKERS.values()]
    manager = backend(tmp_path, server)
    created: list[str] = []
    for fake in fakes[:5]:
        document, fact_id = manager.create_fact(f"the CI uses {fake.snippet}", user_id="dana")
        assert fact_id is not None
        created.append(fact_id)
        assert marker(fake.kind) in json.dumps(document)
    manager.update_fact(created[0], content=f"now {fakes[5].snippet}", user_id="dana")
    manager.import_memory(
        {"facts": [{"content": f"imported {fake.snippet}"} for fake in fakes[6:10]]},
        user_id="erik",
    )
    proposed = [new_fact(f"remember {fake.snippet}") for fake in fakes[10:]]
    server.enqueue(Reply.text(answer(newFacts=proposed)))
    turn = deerflow_turn(" and ".join(f"my key is {fake.snippet}" for fake in fakes[10:]), "Noted.")
    manager.add("thread-1", turn, user_id="fay")
    assert manager.shutdown_flush(30)
    sent = json.dumps([request.messages for request in server.requests])
    stored = files_text(tmp_path)
    logged = caplog.text
    for fake in fakes:
        probe = fake.secret[-16:] if len(fake.secret) >= 16 else fake.secret
        assert probe not in stored, f"a {fake.kind} is stored"
        assert probe not in logged, f"a {fake.kind} is logged"
    for fake in fakes[10:]:
        probe = fake.secret[-16:] if len(fake.secret) >= 16 else fake.secret
        assert probe not in sent, f"a {fake.kind} was sent to the model"
    assert len(manager.get_memory(user_id="fay")["facts"]) == len(fakes[10:])
