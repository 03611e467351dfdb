"""One user's burst must not shut others out of learning: a share of the queue, and turns.

The attack: alice sends 70 conversations at once. A worker holds
``max_pending_jobs`` (64) of them; if any user could take them all, bob's
one conversation would be refused (``429 queue-full``) until alice's had been
learned from. With a share per user, alice is refused at hers
(``max_pending_jobs_per_user``, 8) and bob gets in; with turns, bob's
conversation is learned from after at most one more of alice's, not after
all of them.

The model is a :class:`~deermem.testing.ScriptedChatServer` whose first reply
waits on a gate the test opens, so the queue holds exactly what the test put
in it while it looks; a real uvicorn serves on 127.0.0.1.
"""

from __future__ import annotations

import tempfile
import threading

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem.service.http.jobs import Job, JobRunner, JobStore
from deermem.testing import ScriptedChatServer

from ..served_store import ServedStore, on_both_stores
from ..server.conftest import start_server
from ..wire_support import NOW, answer, conversation, model_settings
from .load_support import (
    PATIENCE,
    chat_server,  # noqa: F401 (the fixture `chat`)
    eventually,
    gated,
    served_store,  # noqa: F401 (the fixture `store`)
)

ALICE = "/v1/users/alice/agents/coder"
BOB = "/v1/users/bob/agents/coder"


def send(client: httpx.Client, scope: str, thread: str, text: str) -> httpx.Response:
    return client.post(
        f"{scope}/conversations",
        json={"threadId": thread, "messages": conversation(text, "Ok.")},
        timeout=PATIENCE,
    )


def finished(client: httpx.Client, response: httpx.Response) -> bool:
    status = client.get(response.headers["location"], timeout=PATIENCE).json()["status"]
    return status not in ("queued", "running")


@on_both_stores
def test_one_users_burst_does_not_refuse_another_user(
    store: ServedStore,
    chat: ScriptedChatServer,
) -> None:
    gate = threading.Event()
    chat.enqueue(gated(gate), *[answer()] * 70)
    server, tokens = start_server(  # the default limits: 64 per worker, 8 per user
        store,
        tokens={"alice": {"users": ["alice"]}, "bob": {"users": ["bob"]}},
        model=model_settings(chat, max_retries=0, timeout_seconds=120.0),
    )
    try:
        alice = server.client(tokens["alice"])
        bob = server.client(tokens["bob"])
        burst = [send(alice, ALICE, f"a-{n}", f"Alice {n}.") for n in range(70)]
        bobs = send(bob, BOB, "b-1", "Bob 1.")
        assert bobs.status_code == 202, bobs.text

        accepted = [response for response in burst if response.status_code == 202]
        refused = [response for response in burst if response.status_code != 202]
        assert len(accepted) == 8
        problem = refused[0].json()
        assert {response.status_code for response in refused} == {429}
        assert problem["type"] == "urn:deermem:problem:queue-full"
        assert (problem["limit"], problem["limitName"]) == (8, "max_pending_jobs_per_user")
        assert refused[0].headers["retry-after"] == "2"
        assert "Alice" not in refused[0].text
        gate.set()
        assert eventually(lambda: finished(bob, bobs))
        assert bob.get(bobs.headers["location"]).json()["status"] == "done"
        # Alice is heard again once hers have been learned from.
        assert eventually(lambda: all(finished(alice, response) for response in accepted))
        assert send(alice, ALICE, "a-again", "Alice again.").status_code == 202
    finally:
        gate.set()
        server.stop()


@on_both_stores
def test_users_take_turns_in_the_queue(
    store: ServedStore,
    chat: ScriptedChatServer,
) -> None:
    gate = threading.Event()
    chat.enqueue(gated(gate), *[answer()] * 5)
    server, _ = start_server(store, model=model_settings(chat, max_retries=0))
    try:
        client = server.client()
        sent = [send(client, ALICE, "a-1", "Alice 1.")]
        assert eventually(lambda: len(chat.requests) == 1)  # alice's first is at the model
        sent += [send(client, ALICE, f"a-{n}", f"Alice {n}.") for n in (2, 3, 4)]
        sent.append(send(client, BOB, "b-1", "Bob 1."))
        assert [response.status_code for response in sent] == [202] * 5
        gate.set()
        assert eventually(lambda: all(finished(client, response) for response in sent))
        heard = [
            next(
                word
                for word in ("Alice 1.", "Alice 2.", "Alice 3.", "Alice 4.", "Bob 1.")
                if word in str(request.messages)
            )
            for request in chat.requests
        ]
        # Round robin: bob's one conversation goes after alice's next, not after all of hers.
        assert heard == ["Alice 1.", "Alice 2.", "Bob 1.", "Alice 3.", "Alice 4."]
    finally:
        gate.set()
        server.stop()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["alice", "bob", "carol"]), min_size=2, max_size=12))
def test_no_user_runs_twice_in_a_row_while_another_waits(users: list[str]) -> None:
    """The runner's turns, for any arrival order: with every job queued behind the
    first, a user runs two jobs in a row only when nobody else has one left, and
    each user's jobs run in the order they were sent."""
    gate, started = threading.Event(), threading.Event()
    ran: list[tuple[str, str]] = []

    def learn(job: Job, messages: list[object]) -> dict[str, object]:
        ran.append((job.user, job.thread_id))
        started.set()
        gate.wait(30)
        return {}

    with tempfile.TemporaryDirectory() as directory:
        store = JobStore(directory, retention_seconds=3600)
        runner = JobRunner(store, learn, max_pending=64, clock=lambda: NOW)
        try:
            runner.submit(users[0], "coder", "t-0", [])
            assert started.wait(30)  # the first job holds the runner: the rest queue
            for number, user in enumerate(users[1:], start=1):
                runner.submit(user, "coder", f"t-{number}", [])
            gate.set()
            assert eventually(lambda: runner.pending == 0)
        finally:
            gate.set()
            runner.close(timeout=30)
    order = [user for user, _ in ran]
    assert sorted(order) == sorted(users)
    for position in range(1, len(order) - 1):
        if order[position] == order[position + 1]:
            assert set(order[position + 1 :]) == {order[position]}, order
    for user in set(users):
        sent = [f"t-{n}" for n, name in enumerate(users) if name == user]
        assert [thread for name, thread in ran if name == user] == sent
