"""One token must not stall everyone: ``?wait=true`` holds no worker thread, and is bounded.

The attack: a token sends more ``POST …/conversations?wait=true`` than the
server has worker threads (40, anyio's default), against a model that does
not answer. Each request waits for its job. If waiting held a thread, every
thread would be held, and another user's ``GET …/facts`` — even
``/v1/health`` — would wait for a thread until the first waits gave up.

The model is a :class:`~deermem.testing.ScriptedChatServer` whose replies wait
on a gate the test opens, so the waits last exactly as long as the test
needs, and a real uvicorn serves on 127.0.0.1. No assertion is on speed:
the other user's requests must *complete* (within generous client
timeouts, which on a starved server they do not).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import yaml

from deermem.service.settings import ServerLimits
from deermem.service.tokens import TokenFile
from deermem.testing import ScriptedChatServer

from ..served_store import ServedStore, on_both_stores
from ..server.conftest import LiveServer, start_server
from ..server.test_serve_cli import deermem, serving
from ..wire_support import NOW, answer, conversation, model_settings
from .load_support import (
    PATIENCE,
    accepted_jobs,
    chat_server,  # noqa: F401 (the fixture `chat`)
    eventually,
    gated,
    served_store,  # noqa: F401 (the fixture `store`)
)

ALICE = "/v1/users/alice/agents/coder"
BOB = "/v1/users/bob/agents/coder"
WORKER_THREADS = 40  # anyio's default thread limiter: the threads sync routes run in


@contextmanager
def learning_server(
    store: ServedStore, chat: ScriptedChatServer, limits: ServerLimits
) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    server, tokens = start_server(
        store,
        limits=limits,
        tokens={"alice": {"users": ["alice"]}, "bob": {"users": ["bob"]}},
        model=model_settings(chat, max_retries=0, timeout_seconds=120.0),
    )
    try:
        yield server, tokens
    finally:
        server.stop()


def post_and_wait(client: httpx.Client, number: int) -> httpx.Response:
    return client.post(
        f"{ALICE}/conversations",
        params={"wait": "true"},
        json={"threadId": f"t-{number}", "messages": conversation(f"Message {number}.", "Ok.")},
    )


@on_both_stores
def test_waiting_requests_of_one_token_leave_the_server_to_everyone(
    store: ServedStore,
    chat: ScriptedChatServer,
) -> None:
    waits = WORKER_THREADS + 5
    gate = threading.Event()
    chat.enqueue(*[gated(gate)] * waits)
    limits = ServerLimits(
        max_pending_jobs=waits, max_pending_jobs_per_user=waits, max_waits_per_token=waits
    )
    with (
        learning_server(store, chat, limits) as (server, tokens),
        httpx.Client(
            base_url=server.url,
            headers={"Authorization": f"Bearer {tokens['alice']}"},
            timeout=180,
            limits=httpx.Limits(max_connections=waits),
        ) as alice,
        ThreadPoolExecutor(max_workers=waits) as senders,
    ):
        bob = server.client(tokens["bob"])
        answers: list[Future[httpx.Response]] = []
        try:
            answers = [senders.submit(post_and_wait, alice, n) for n in range(waits)]
            # Every conversation is accepted and its request waits (on a starved
            # server the requests beyond the thread count never even get in).
            all_waiting = eventually(lambda: accepted_jobs(store) == waits)
            assert eventually(lambda: len(chat.requests) == 1)  # the first job is at the model

            facts = bob.get(f"{BOB}/facts", timeout=PATIENCE)
            assert facts.status_code == 200
            health = bob.get("/v1/health", timeout=PATIENCE)
            assert health.json()["status"] == "ok"
            written = bob.post(
                f"{BOB}/facts",
                json={"content": "Prefers tea", "category": "preference", "confidence": 0.8},
                timeout=PATIENCE,
            )
            assert written.status_code == 201
            assert all_waiting, f"only {accepted_jobs(store)} of {waits} conversations got in"
            assert not any(pending.done() for pending in answers)  # all of them still wait
        finally:
            gate.set()
        for response in (pending.result(timeout=180) for pending in answers):
            assert response.status_code == 200, response.text
            assert response.json()["status"] == "done"


def test_a_token_waits_only_so_many_times_at_once(
    store: ServedStore,
    chat: ScriptedChatServer,
) -> None:
    gate = threading.Event()
    chat.enqueue(*[gated(gate)] * 4)
    limits = ServerLimits(max_waits_per_token=2)
    with (
        learning_server(store, chat, limits) as (server, tokens),
        ThreadPoolExecutor(max_workers=3) as senders,
    ):
        alice = server.client(tokens["alice"])
        bob = server.client(tokens["bob"])
        waiting: list[Future[httpx.Response]] = []
        try:
            waiting = [senders.submit(post_and_wait, alice, n) for n in range(2)]
            assert eventually(lambda: accepted_jobs(store) == 2)

            refused = alice.post(
                f"{ALICE}/conversations",
                params={"wait": "true"},
                json={"threadId": "t-3", "messages": conversation("More.", "Ok.")},
                timeout=PATIENCE,
            )
            assert refused.status_code == 429, refused.text
            assert refused.headers["content-type"] == "application/problem+json"
            problem = refused.json()
            assert problem["type"] == "urn:deermem:problem:too-many-waits"
            assert (problem["limit"], problem["limitName"]) == (2, "max_waits_per_token")
            assert refused.headers["retry-after"] == "2"
            assert "More." not in refused.text
            assert accepted_jobs(store) == 2  # refused before anything was queued

            # Without waiting, alice is still heard; bob's token waits as ever.
            assert (
                alice.post(
                    f"{ALICE}/conversations",
                    json={"threadId": "t-4", "messages": conversation("Later.", "Ok.")},
                    timeout=PATIENCE,
                ).status_code
                == 202
            )
            bobs = senders.submit(
                bob.post,
                f"{BOB}/conversations",
                params={"wait": "true"},
                json={"threadId": "b-1", "messages": conversation("Bob here.", "Hi.")},
            )
            assert eventually(lambda: accepted_jobs(store) == 4)
        finally:
            gate.set()
        assert bobs.result(timeout=120).json()["status"] == "done"
        assert [pending.result(timeout=120).status_code for pending in waiting] == [200, 200]
        # Once the waits have ended, the token may wait again.
        chat.enqueue(answer())
        again = post_and_wait(alice, 5)
        assert (again.status_code, again.json()["status"]) == (200, "done")


def test_waits_on_two_workers_end_with_their_own_jobs(tmp_path: Path) -> None:
    """``deermem serve --workers 2``: each wait ends with the job its worker took, and
    every worker reads every job (the records are shared files)."""
    store = ServedStore("markdown", tmp_path)
    token = TokenFile(store.tokens_file).add(now=NOW, users=["alice"]).token
    waits = 6
    with ScriptedChatServer() as chat:
        gate = threading.Event()
        chat.enqueue(*[gated(gate)] * waits)
        config = tmp_path / "deermem.yaml"
        config.write_text(yaml.safe_dump({"model": model_settings(chat, max_retries=0)}))
        args = deermem(
            *store.global_args(), "--config", str(config), "serve", "--workers", "2",
            "--max-waits-per-token", str(waits), "--max-pending-jobs-per-user", str(waits),
        )  # fmt: skip
        headers = {"Authorization": f"Bearer {token}"}

        def post(number: int) -> httpx.Response:  # a new connection each: either worker
            return httpx.post(
                f"{url}{ALICE}/conversations",
                params={"wait": "true"},
                json={"threadId": f"t-{number}", "messages": conversation(f"No {number}.", "Ok")},
                headers=headers,
                timeout=120,
            )

        with (
            serving(args, tmp_path / "server.log", store.environ(os.environ)) as url,
            ThreadPoolExecutor(max_workers=waits) as senders,
        ):
            try:
                answers = [senders.submit(post, n) for n in range(waits)]
                assert eventually(lambda: accepted_jobs(store) == waits)
                for _ in range(4):
                    assert httpx.get(f"{url}/v1/health", timeout=PATIENCE).status_code == 200
            finally:
                gate.set()
            jobs = [pending.result(timeout=120) for pending in answers]
            assert [(job.status_code, job.json()["status"]) for job in jobs] == [
                (200, "done")
            ] * waits
            for job in jobs:
                for _ in range(2):
                    again = httpx.get(f"{url}{job.headers['location']}", headers=headers)
                    assert again.json()["status"] == "done"
