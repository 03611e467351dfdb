"""The conversation endpoint against the scripted chat server: queued, 202, the job, the report."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import httpx
import pytest

from deermem.service.http.jobs import Job, JobRunner, JobStore
from deermem.service.problems import ProblemError
from deermem.service.settings import ServerLimits
from deermem.testing import Reply, ScriptedChatServer

from ..served_store import ServedStore, on_both_stores
from ..wire_support import NOW, answer, conversation, model_settings, new_fact
from .conftest import LiveServer, start_server

ALICE = "/v1/users/alice/agents/coder"
CHAT = conversation("I always use uv for Python projects.", "Noted: uv it is.")


def poll(client: httpx.Client, url: str, timeout: float = 20) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        job = dict(client.get(url).json())
        if job["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return job
        time.sleep(0.02)


@on_both_stores
def test_a_conversation_is_acknowledged_then_learned_from(
    learning: LiveServer, chat: ScriptedChatServer
) -> None:
    chat.enqueue(answer(newFacts=[new_fact("Uses uv for Python projects", 0.9)]))
    client = learning.client()
    accepted = client.post(f"{ALICE}/conversations", json={"threadId": "t-1", "messages": CHAT})
    assert accepted.status_code == 202
    job = accepted.json()
    assert job["status"] in ("queued", "running", "done")
    assert accepted.headers["location"] == f"/v1/jobs/{job['jobId']}"
    done = poll(client, accepted.headers["location"])
    assert done["status"] == "done", done
    report = done["report"]
    assert isinstance(report, dict)
    assert report["outcome"] == "applied"
    assert len(report["added"]) == 1
    assert "uv" not in str(report)  # the report is ids and counters only
    facts = learning.memory.scoped(user="alice", agent="coder").list_facts()
    assert [fact.id for fact in facts] == report["added"]
    assert facts[0].content == "Uses uv for Python projects"
    assert "Uses uv for Python projects" in learning.store.facts("alice", "coder")[facts[0].id]
    # The model saw the conversation.
    assert "I always use uv" in str(chat.requests[0].messages)


@on_both_stores
def test_wait_true_answers_with_the_report(learning: LiveServer, chat: ScriptedChatServer) -> None:
    chat.enqueue(answer(newFacts=[new_fact("Works in Berlin", 0.8)]))
    client = learning.client()
    response = client.post(
        f"{ALICE}/conversations",
        params={"wait": "true"},
        json={"threadId": "t-2", "messages": conversation("I work in Berlin.", "Nice.")},
    )
    assert response.status_code == 200
    assert response.json()["status"] == "done"
    assert response.json()["report"]["counts"]["added"] == 1
    # The same conversation again: nothing new, no model call.
    again = client.post(
        f"{ALICE}/conversations",
        params={"wait": "true"},
        json={"threadId": "t-2", "messages": conversation("I work in Berlin.", "Nice.")},
    )
    assert again.json()["report"]["outcome"] == "nothing-new"
    assert len(chat.requests) == 1


def test_a_failing_model_makes_a_failed_job_with_a_problem(
    learning: LiveServer, chat: ScriptedChatServer
) -> None:
    chat.enqueue(Reply.error(500, message="upstream broke"))
    client = learning.client()
    job = client.post(
        f"{ALICE}/conversations", params={"wait": "true"}, json={"threadId": "t", "messages": CHAT}
    ).json()
    assert job["status"] == "failed"
    assert job["error"]["type"] == "urn:deermem:problem:model-failed"
    assert job["error"]["modelStatus"] == 500
    assert "upstream broke" not in str(job)


def test_a_bad_pattern_file_fails_the_job_naming_the_file_in_the_log(
    store: ServedStore,
    chat: ScriptedChatServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A pattern file broken after start-up: the job's problem says the server is
    misconfigured, and its log line names the file and the pattern (it said only
    `internal-error (PatternError)`)."""
    patterns = tmp_path / "patterns"
    patterns.mkdir()
    (patterns / "goal.yaml").write_text("- '(unclosed'\n", "utf-8")
    server, _ = start_server(
        store, model=model_settings(chat, max_retries=0), patterns_dir=str(patterns)
    )
    try:
        with caplog.at_level("WARNING", logger="deermem"):
            job = (
                server.client()
                .post(
                    f"{ALICE}/conversations",
                    params={"wait": "true"},
                    json={"threadId": "t", "messages": CHAT},
                )
                .json()
            )
    finally:
        server.stop()
    assert job["status"] == "failed"
    assert job["error"]["type"] == "urn:deermem:problem:server-misconfigured"
    assert "goal.yaml" not in str(job)  # the client is told where to look, not the file
    [line] = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert f"{patterns / 'goal.yaml'}: pattern 0 `(unclosed`: invalid regular expression" in line
    assert "uv" not in line  # no conversation text
    assert chat.requests == []


def test_a_malformed_message_is_refused_before_queueing(
    learning: LiveServer, chat: ScriptedChatServer
) -> None:
    response = learning.client().post(
        f"{ALICE}/conversations",
        json={"threadId": "t", "messages": [{"role": "wizard", "content": "secret words"}]},
    )
    assert response.status_code == 422
    body = response.json()
    assert body["type"] == "urn:deermem:problem:invalid-message"
    assert body["index"] == 0
    assert body["field"] == "role"
    assert "secret words" not in response.text
    assert "wizard" not in response.text
    assert chat.requests == []


def test_a_full_queue_answers_429_naming_the_limit(
    store: ServedStore, chat: ScriptedChatServer
) -> None:
    server, _ = start_server(
        store,
        limits=ServerLimits(max_pending_jobs=1),
        model=model_settings(chat, max_retries=0),
    )
    try:
        chat.enqueue(Reply(delay=1.0, body=b"{}"), answer())
        client = server.client()
        first = client.post(f"{ALICE}/conversations", json={"threadId": "a", "messages": CHAT})
        assert first.status_code == 202
        second = client.post(f"{ALICE}/conversations", json={"threadId": "b", "messages": CHAT})
        assert second.status_code == 429
        body = second.json()
        assert (body["limit"], body["limitName"]) == (1, "max_pending_jobs")
        assert second.headers["retry-after"] == "2"
        assert poll(client, first.headers["location"])["status"] in ("done", "failed")
    finally:
        server.stop()


def test_without_a_model_extraction_is_off(live: LiveServer) -> None:
    response = live.client().post(
        f"{ALICE}/conversations", json={"threadId": "t", "messages": CHAT}
    )
    assert response.status_code == 501
    assert response.json()["type"] == "urn:deermem:problem:extraction-off"


def test_an_unknown_job_is_404(learning: LiveServer) -> None:
    client = learning.client()
    assert client.get("/v1/jobs/job_" + "0" * 32).status_code == 404
    assert client.get("/v1/jobs/../../etc/passwd").status_code == 404


def test_a_job_is_visible_only_to_tokens_of_its_user(
    store: ServedStore, chat: ScriptedChatServer
) -> None:
    server, tokens = start_server(
        store,
        model=model_settings(chat, max_retries=0),
        tokens={"alice": {"users": ["alice"]}, "bob": {"users": ["bob"]}},
    )
    try:
        chat.enqueue(answer())
        bob = server.client(tokens["bob"])
        job = bob.post(
            "/v1/users/bob/agents/coder/conversations",
            params={"wait": "true"},
            json={"threadId": "t", "messages": CHAT},
        ).json()
        assert bob.get(f"/v1/jobs/{job['jobId']}").status_code == 200
        alice = server.client(tokens["alice"])
        assert alice.get(f"/v1/jobs/{job['jobId']}").status_code == 404
    finally:
        server.stop()


def runner_with_a_held_job(
    tmp_path: Path,
) -> tuple[JobRunner, threading.Event, str]:
    """A runner whose first job (alice's) is running and holds it until the gate opens."""
    gate, started = threading.Event(), threading.Event()

    def learn(job: Job, messages: list[object]) -> dict[str, object]:
        started.set()
        gate.wait(30)
        return {"outcome": "nothing-new"}

    runner = JobRunner(
        JobStore(tmp_path, retention_seconds=3600), learn, max_pending=8, clock=lambda: NOW
    )
    held = runner.submit("alice", "coder", "t-0", [])
    assert started.wait(30)
    return runner, gate, held.job_id


def test_a_wait_is_woken_by_the_end_of_its_job_and_holds_no_thread(tmp_path: Path) -> None:
    runner, gate, held = runner_with_a_held_job(tmp_path)
    try:

        async def scenario() -> None:
            # While the job runs, a wait that runs out answers the job's latest state.
            latest = await runner.wait(held, timeout=0.05)
            assert latest is not None
            assert latest.status == "running"
            # The job's thread wakes the coroutine; the loop's own thread never blocks.
            waiting = asyncio.create_task(runner.wait(held, timeout=60))
            await asyncio.sleep(0)
            assert not waiting.done()
            gate.set()
            ended = await waiting
            assert ended is not None
            assert ended.status == "done"
            assert ended.report == {"outcome": "nothing-new"}
            assert await runner.wait(held, timeout=60) is None  # no longer here: read it

        asyncio.run(scenario())
        record = runner.get(held)
        assert record is not None
        assert record.status == "done"
    finally:
        gate.set()
        runner.close(timeout=30)


def test_a_stopping_runner_records_every_job_it_did_not_finish(tmp_path: Path) -> None:
    runner, gate, held = runner_with_a_held_job(tmp_path)
    try:
        queued = [runner.submit(user, "coder", "t-1", []).job_id for user in ("alice", "bob")]

        async def wait_while_stopping() -> Job | None:
            waiting = asyncio.create_task(runner.wait(queued[1], timeout=60))
            await asyncio.sleep(0)
            await asyncio.to_thread(runner.close, 0.1)  # the held job outlasts the timeout
            return await waiting

        woken = asyncio.run(wait_while_stopping())
        assert woken is not None
        assert woken.status == "abandoned"
        for job_id in queued:
            record = runner.get(job_id)
            assert record is not None
            assert record.status == "abandoned"
            assert record.error is not None
            assert "stopped before it ran" in str(record.error["detail"])
        running = runner.get(held)
        assert running is not None
        assert running.status == "abandoned"
        assert running.started_at is not None
        assert "stopped while it ran" in str(running.error)
        assert "not learned twice" in str(running.error)  # it may have committed
        with pytest.raises(ProblemError) as refused:
            runner.submit("carol", "coder", "t-2", [])
        assert refused.value.problem.status == 429
        assert runner.pending == 0
    finally:
        gate.set()


def test_the_example_conversation_file_is_taken_as_it_is(
    learning: LiveServer, chat: ScriptedChatServer
) -> None:
    """examples/conversation.json spells thread_id, as `deermem ingest` reads it; the API
    wanted threadId and answered 422 (issue 24, point 8). Both spellings are taken."""
    example = json.loads((Path(__file__).parents[2] / "examples/conversation.json").read_text())
    assert "thread_id" in example
    chat.enqueue(answer(newFacts=[new_fact("Uses uv, never pip", 0.9)]))
    client = learning.client()
    response = client.post(f"{ALICE}/conversations", params={"wait": "true"}, json=example)
    assert response.status_code == 200, response.text
    assert response.json()["report"]["threadId"] == example["thread_id"]
    assert response.json()["report"]["counts"]["added"] == 1


def test_both_spellings_of_the_thread_id_are_declared_names(
    learning: LiveServer, chat: ScriptedChatServer
) -> None:
    """svc-06: `thread_id` is a name the API declares, so a refusal names it as it is (it was
    described by its length, as a name the caller made up), and the reference says both."""
    client = learning.client()
    both = {"threadId": "t-1", "thread_id": "t-1", "messages": CHAT}
    refused = client.post(f"{ALICE}/conversations", json=both)
    assert refused.status_code == 422, refused.text
    assert [error["location"] for error in refused.json()["errors"]] == ["body.thread_id"]
    assert chat.requests == []
    schema = client.get("/v1/openapi.json").json()["components"]["schemas"]["ConversationIn"]
    assert "thread_id" in schema["properties"]["threadId"]["description"]


def test_the_job_store_prunes_old_records_and_forgets_a_users_jobs(tmp_path: Path) -> None:
    # Both walk the same directory listing: only `<job id>.json` files are job records.
    def job(number: int, user: str) -> Job:
        return Job(f"job_{number:032x}", "done", user, "coder", f"t-{number}", NOW.isoformat())

    missing = JobStore(tmp_path / "none-yet", retention_seconds=0)
    assert missing.forget_user("alice") == 0
    assert missing.prune() == 0
    store = JobStore(tmp_path / "jobs", retention_seconds=3600)
    for number, user in enumerate(("alice", "bob", "alice")):
        store.save(job(number, user))
    (store.directory / "notes.json").write_text("{}", encoding="utf-8")
    (store.directory / f"job_{9:032x}.json").write_text("not json", encoding="utf-8")
    assert store.forget_user("alice") == 2
    assert sorted(path.name for path in store.directory.iterdir()) == [
        f"job_{1:032x}.json",
        f"job_{9:032x}.json",
        "notes.json",
    ]
    assert store.prune() == 0  # every record is younger than the retention
    time.sleep(0.01)  # the records' modification times are in the past
    assert JobStore(store.directory, retention_seconds=0).prune() == 2  # never another file
    assert [path.name for path in store.directory.iterdir()] == ["notes.json"]


@pytest.mark.parametrize("thread_id", ["bad\u0007id", "two\nlines", "\u2028", "", "   ", "t" * 257])
def test_a_thread_id_learn_would_refuse_is_refused_before_queueing(
    learning: LiveServer, chat: ScriptedChatServer, thread_id: str
) -> None:
    # The route applies Memory.learn's rule itself (deermem.model.check_thread_id): before,
    # only the schema's pattern said it, the id was accepted (202) and the job failed later.
    response = learning.client().post(
        f"{ALICE}/conversations", json={"threadId": thread_id, "messages": CHAT}
    )
    assert response.status_code == 422, response.text
    body = response.json()
    # The request's field, as a threadId of the wrong JSON type is: not a fact's.
    assert body["type"] == "urn:deermem:problem:invalid-request"
    [refused] = body["errors"]
    assert refused["location"] == "body.threadId"
    assert refused["rule"] == "thread_id"
    assert "expected" in refused["message"]
    assert thread_id.strip() == "" or thread_id not in response.text
    assert "jobId" not in body
    assert chat.requests == []


def test_a_thread_id_learn_accepts_is_accepted_up_to_its_limit(
    learning: LiveServer, chat: ScriptedChatServer
) -> None:
    # One rule (check_thread_id, 256 characters), not a stricter one of the route's own.
    chat.enqueue(answer())
    response = learning.client().post(
        f"{ALICE}/conversations",
        params={"wait": "true"},
        json={"threadId": "t" * 256, "messages": CHAT},
    )
    assert response.status_code == 200, response.text
    assert response.json()["report"]["threadId"] == "t" * 256
