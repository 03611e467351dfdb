"""deermem.testing.ScriptedChatServer: the scripted endpoint other tests (and users) rely on.

These talk to the server with plain httpx, so they pin the server's own
behaviour independently of deermem's client.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from deermem.testing import EMPTY_QUEUE_STATUS, RecordedRequest, Reply, ScriptedChatServer

BODY = {"model": "m", "messages": [{"role": "user", "content": "three little words"}]}


def post(server: ScriptedChatServer, body: object = BODY, **options: object) -> httpx.Response:
    return httpx.post(f"{server.url}/chat/completions", json=body, **options)  # type: ignore[arg-type]


def test_url_is_loopback_with_a_free_port() -> None:
    with ScriptedChatServer() as one, ScriptedChatServer(base_path="/api/") as two:
        assert one.url.startswith("http://127.0.0.1:")
        assert one.url.endswith("/v1")
        assert two.url.endswith("/api")
        assert one.url.rsplit(":", 1)[1] != two.url.rsplit(":", 1)[1]


def test_replies_are_taken_in_order_and_requests_recorded() -> None:
    with ScriptedChatServer() as server:
        server.enqueue("first", {"custom": True}, Reply.error(500))
        assert server.remaining == 3
        first = post(server).json()
        assert first["choices"][0]["message"] == {"role": "assistant", "content": "first"}
        assert first["usage"] == {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
        assert post(server).json() == {"custom": True}
        assert post(server).status_code == 500
        assert server.remaining == 0
        requests = server.requests
    assert [request.json() for request in requests] == [BODY] * 3
    assert requests[0].method == "POST"
    assert requests[0].path == "/v1/chat/completions"
    assert requests[0].headers["content-type"] == "application/json"
    assert requests[0].messages == BODY["messages"]


def test_an_empty_queue_answers_a_status_no_server_sends() -> None:
    with ScriptedChatServer() as server:
        response = post(server)
    assert response.status_code == EMPTY_QUEUE_STATUS
    assert "no scripted reply left for request 1" in response.json()["error"]["message"]


def test_other_paths_are_404_and_do_not_consume_the_queue() -> None:
    with ScriptedChatServer() as server:
        server.enqueue("kept")
        response = httpx.get(f"{server.url}/models")
        assert response.status_code == 404
        assert server.remaining == 1
        assert server.requests[0].method == "GET"


def test_a_function_reply_sees_the_request() -> None:
    def echo(request: RecordedRequest) -> str:
        return str(request.messages[-1]["content"]).upper()

    with ScriptedChatServer() as server:
        server.enqueue(echo, lambda request: Reply.error(503))
        assert post(server).json()["choices"][0]["message"]["content"] == "THREE LITTLE WORDS"
        assert post(server).status_code == 503


def test_error_reply_carries_retry_after_and_an_openai_style_body() -> None:
    with ScriptedChatServer() as server:
        server.enqueue(Reply.error(429, retry_after=1.5, message="slow down"))
        response = post(server)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "1.5"
    assert response.json() == {"error": {"message": "slow down", "type": "scripted"}}


def test_text_reply_options() -> None:
    with ScriptedChatServer() as server:
        server.enqueue(
            Reply.text("x", usage=None, finish_reason="length", model="other"),
            Reply.text([{"type": "text", "text": "a b"}], usage={"total_tokens": 9}),
        )
        first = post(server).json()
        second = post(server).json()
    assert "usage" not in first
    assert first["model"] == "other"
    assert first["choices"][0]["finish_reason"] == "length"
    assert second["choices"][0]["message"]["content"] == [{"type": "text", "text": "a b"}]
    assert second["usage"] == {"total_tokens": 9}


def test_raw_reply_sends_bytes_as_they_are() -> None:
    with ScriptedChatServer() as server:
        server.enqueue(Reply.raw("{broken", content_type="application/json"))
        response = post(server)
    assert response.content == b"{broken"
    assert response.headers["content-type"] == "application/json"


def test_delayed_reply_makes_a_client_time_out() -> None:
    with ScriptedChatServer() as server:
        server.enqueue(Reply.text("late", delay=2))
        with pytest.raises(httpx.ReadTimeout):
            post(server, timeout=0.2)


def test_closing_ends_a_delayed_reply_at_once() -> None:
    server = ScriptedChatServer().start()
    server.enqueue(Reply.text("late", delay=30))
    with httpx.Client() as client:
        pending = client.build_request("POST", f"{server.url}/chat/completions", json=BODY)
        outcome: list[object] = []
        thread = threading.Thread(
            target=lambda: outcome.append(_send_catching(client, pending)), daemon=True
        )
        thread.start()
        time.sleep(0.2)
        started = time.monotonic()
        server.close()
        thread.join(5)
    assert time.monotonic() - started < 3
    assert isinstance(outcome[0], httpx.TransportError)


def _send_catching(client: httpx.Client, request: httpx.Request) -> object:
    try:
        return client.send(request)
    except httpx.TransportError as error:
        return error


def test_dropped_connection_and_partial_body() -> None:
    with ScriptedChatServer() as server:
        server.enqueue(Reply.drop_connection(), Reply.drop_connection(partial=b'{"cho'))
        with pytest.raises(httpx.RemoteProtocolError):
            post(server)
        with pytest.raises(httpx.RemoteProtocolError):
            post(server)


def test_clear_and_lifecycle() -> None:
    server = ScriptedChatServer()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.url
    with server:
        server.enqueue("a")
        post(server)
        server.clear()
        assert server.requests == []
        assert server.remaining == 0
        with pytest.raises(RuntimeError, match="already running"):
            server.start()
        url = server.url
    server.close()  # closing twice is harmless
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{url}/chat/completions", json=BODY)


def test_recorded_request_json_must_be_an_object() -> None:
    request = RecordedRequest("POST", "/", {}, json.dumps([1]).encode())
    with pytest.raises(ValueError, match="not an object"):
        request.json()
