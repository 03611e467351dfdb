"""OpenAICompatibleModel over real HTTP to the scripted server on 127.0.0.1.

Every test here sends real requests through httpx to a real socket: the
payload, the headers, the retries, the timeouts and the parsing all run as
they would against DeepSeek or vLLM. Waits between retries go through an
injected ``sleep`` that records them, so the schedule is asserted exactly
without the suite sleeping for it (timeouts, which httpx measures itself,
do take real time, kept to fractions of a second).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from deermem import ConfigError, DeerMemError, LLMError
from deermem.errors import LLMResponseInvalid, LLMStatusError, LLMTimeout, LLMTransportError
from deermem.llm import (
    ChatMessage,
    OpenAICompatibleModel,
    RetryPolicy,
    openai,
    request_fingerprint,
)
from deermem.testing import Reply, ScriptedChatServer

KEY = "sk-test-0123456789abcdef"
HELLO = [ChatMessage.system("be brief"), ChatMessage.user("hello")]


class Sleeps(list[float]):
    """An injected ``sleep`` that records the waits instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


class ModelFactory:
    """Builds clients aimed at the scripted server, and closes them after the test."""

    def __init__(self, server: ScriptedChatServer, sleeps: Sleeps) -> None:
        self.server = server
        self.sleeps = sleeps
        self.made: list[OpenAICompatibleModel] = []

    def __call__(self, **options: object) -> OpenAICompatibleModel:
        settings: dict[str, object] = {
            "base_url": self.server.url,
            "api_key_env": "TEST_LLM_KEY",
            "environ": {"TEST_LLM_KEY": KEY},
            "retry": RetryPolicy(max_retries=2, backoff_seconds=1.0, max_total_wait_seconds=30),
            "sleep": self.sleeps,
            "timeout_seconds": 5.0,
        }
        settings.update(options)
        model = OpenAICompatibleModel("test-model", **settings)  # type: ignore[arg-type]
        self.made.append(model)
        return model


@pytest.fixture
def make_model(server: ScriptedChatServer, sleeps: Sleeps) -> Iterator[ModelFactory]:
    factory = ModelFactory(server, sleeps)
    yield factory
    for model in factory.made:
        model.close()


# --- a normal call --------------------------------------------------------------


def test_answer_text_usage_and_reported_model(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(Reply.text("two words", model="served-model"))
    response = make_model().complete(HELLO)
    assert response.text == "two words"
    assert response.model == "served-model"
    assert response.finish_reason == "stop"
    assert response.attempts == 1
    # The scripted server counts words: "be brief" + "hello" = 3, answer = 2.
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (3, 2)
    assert response.usage.total_tokens == 5
    assert sleeps == []


def test_request_goes_to_chat_completions_with_the_built_payload(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue("ok")
    model = make_model(temperature=0, max_tokens=128)
    payload = model.build_payload(HELLO)
    model.send(payload)
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["content-type"] == "application/json"
    assert request.json() == payload
    assert payload == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello"},
        ],
        "stream": False,
        "temperature": 0.0,
        "max_tokens": 128,
    }
    assert isinstance(payload["temperature"], float)


def test_complete_sends_exactly_what_build_payload_returns(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue("a", "b")
    model = make_model(seed=7)
    model.complete(HELLO)
    model.send(model.build_payload(HELLO))
    first, second = server.requests
    assert first.body == second.body
    assert first.json()["seed"] == 7


def test_unicode_is_sent_as_utf8_not_escaped(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue("好的")
    response = make_model().complete([ChatMessage.user("对，就是这样")])
    assert response.text == "好的"
    assert "对，就是这样".encode() in server.requests[0].body


def test_fingerprint_follows_the_evaluation_rule() -> None:
    payload = {
        "model": "deepseek-v4-flash",
        "temperature": 0.0,
        "max_tokens": 2048,
        "stream": False,
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "问"}],
    }
    expected_text = (
        '{"max_tokens": 2048, "messages": [{"content": "S", "role": "system"}, '
        '{"content": "问", "role": "user"}], "model": "deepseek-v4-flash", "stream": false, '
        '"temperature": 0.0}'
    )
    import hashlib

    assert request_fingerprint(payload) == hashlib.sha256(expected_text.encode()).hexdigest()
    assert request_fingerprint(dict(reversed(payload.items()))) == request_fingerprint(payload)


def test_payload_without_optional_settings() -> None:
    with OpenAICompatibleModel(
        "m", api_key_env=None, temperature=None, max_tokens=None, environ={}
    ) as model:
        assert model.build_payload(HELLO).keys() == {"model", "messages", "stream"}
        with pytest.raises(ValueError, match="at least one message"):
            model.build_payload([])


# --- the API key ----------------------------------------------------------------


def test_key_travels_only_in_the_authorization_header(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue("ok")
    model = make_model()
    model.complete(HELLO)
    (request,) = server.requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert KEY.encode() not in request.body
    assert KEY not in repr(model)
    assert "TEST_LLM_KEY" in repr(model)


def test_no_key_variable_sends_no_authorization(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue("ok")
    make_model(api_key_env=None).complete(HELLO)
    assert "authorization" not in server.requests[0].headers


@pytest.mark.parametrize("environ", [{}, {"TEST_LLM_KEY": ""}, {"TEST_LLM_KEY": "   "}])
def test_unset_key_variable_is_a_config_error_naming_it(environ: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="TEST_LLM_KEY") as caught:
        OpenAICompatibleModel("m", api_key_env="TEST_LLM_KEY", environ=environ)
    assert "null" in str(caught.value)


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (
            "sk-abcdef1234567890\u200b",
            "an invisible format character (U+200B ZERO WIDTH SPACE) at character 20 of 20",
        ),
        (" sk-abc\u00a0def", "a non-ASCII space (U+00A0 NO-BREAK SPACE) at character 8 of 11"),
        ("sk-abc\tdef", "a control character (U+0009) at character 7 of 10"),
        (
            "sk-abcdéf",
            "a non-ASCII character (U+00E9 LATIN SMALL LETTER E WITH ACUTE) at character 8 of 9",
        ),
    ],
)
def test_a_key_that_is_not_printable_ascii_is_a_config_error_without_the_key(
    value: str, where: str
) -> None:
    # A header carries ASCII only: httpx would raise a bare UnicodeEncodeError at every call.
    with pytest.raises(ConfigError) as caught:
        OpenAICompatibleModel("m", api_key_env="TEST_LLM_KEY", environ={"TEST_LLM_KEY": value})
    message = str(caught.value)
    assert "TEST_LLM_KEY" in message
    assert where in message
    assert "sk-abc" not in message
    assert "\n" not in message


def test_a_key_with_non_ascii_space_around_it_is_stripped(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue("ok")
    make_model(environ={"TEST_LLM_KEY": f"\u00a0{KEY}\n"}).complete(HELLO)
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


UNSENDABLE_KEYS = [
    "sk-SECRET-new\nsk-SECRET-old",  # export KEY="$(cat keyfile)" of two lines
    "sk-SECRET\r\nX-Injected: 1",
    "sk-SECRET\x00tail",  # possible in a mapping passed as environ, not in os.environ
    "sk-SECRET\x0btail",
    "sk-SECRET\u2026",  # a pasted ellipsis
    "sk-SECRET\u200btail",  # a zero-width space
]


@pytest.mark.parametrize("key", UNSENDABLE_KEYS)
def test_a_key_no_header_can_carry_is_refused_naming_the_variable_not_the_value(
    key: str,
) -> None:
    with pytest.raises(ConfigError, match="TEST_LLM_KEY") as caught:
        OpenAICompatibleModel("m", api_key_env="TEST_LLM_KEY", environ={"TEST_LLM_KEY": key})
    assert "SECRET" not in str(caught.value)
    assert "printable ASCII" in str(caught.value)


@pytest.mark.parametrize("key", [k for k in UNSENDABLE_KEYS if k.isascii()])
def test_the_http_stack_quoting_a_key_escaped_is_redacted(
    key: str, server: ScriptedChatServer
) -> None:
    # h11 refuses such a header by quoting its bytes repr, where a line break is the
    # two characters backslash and n; the plain key never occurs in that text.
    with httpx.Client() as client, pytest.raises(httpx.HTTPError) as refused:
        client.post(server.url, headers={"Authorization": f"Bearer {key}"})
    assert "SECRET" in str(refused.value)  # what deermem must not pass on
    failures = openai.Failures("m", server.url, 5.0, (key,))
    error = failures.transport(refused.value, 1)
    assert "SECRET" not in str(error)
    assert "[redacted]" in str(error)


@pytest.mark.parametrize("key", UNSENDABLE_KEYS)
def test_every_escaped_form_of_a_secret_is_redacted(key: str) -> None:
    quoted = [key, repr(key), repr(key.encode("utf-8")), json.dumps(key), ascii(key)]
    text = openai.redact(" | ".join(quoted), key)
    assert "SECRET" not in text


def test_key_is_read_from_the_process_environment_by_default(
    server: ScriptedChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.enqueue("ok")
    with OpenAICompatibleModel("m", base_url=server.url) as model:
        model.complete(HELLO)
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_errors_and_logs_never_contain_the_key(
    server: ScriptedChatServer,
    sleeps: Sleeps,
    make_model: ModelFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    # A server that echoes the key back, first in a retried 503, then in a 401.
    server.enqueue(
        Reply.error(503, message=f"overloaded for {KEY}"),
        Reply.error(401, message=f"Incorrect API key provided: {KEY}"),
    )
    with pytest.raises(LLMStatusError) as caught:
        make_model().complete(HELLO)
    error = caught.value
    assert error.status_code == 401
    assert "[redacted]" in str(error)
    assert KEY not in str(error)
    assert KEY not in error.detail
    assert KEY not in repr(error)
    assert KEY not in caplog.text
    assert "retrying" in caplog.text  # the 503 was logged, without the key


def test_credentials_in_the_base_url_are_not_shown(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    url = server.url.replace("http://", "http://alice:hunter2@")
    server.enqueue(Reply.error(400, message="bad request"))
    model = make_model(base_url=url)
    with pytest.raises(LLMStatusError) as caught:
        model.complete(HELLO)
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in repr(model)
    shown = server.url.replace("http://", "http://alice:***@")
    assert caught.value.endpoint == shown + "/chat/completions"


def test_a_query_in_the_base_url_stays_the_query_of_the_endpoint(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    # Some endpoints (Azure-style proxies) take the key as ?api-key=: the path goes
    # before the query, not after it.
    server.enqueue("fine")
    model = make_model(base_url=server.url + "?api-key=QUERYKEY123", api_key_env=None)
    assert model.endpoint == server.url + "/chat/completions?api-key=QUERYKEY123"
    assert model.complete(HELLO).text == "fine"
    assert server.requests[0].path == "/v1/chat/completions?api-key=QUERYKEY123"


def test_server_text_echoing_secrets_of_the_base_url_is_redacted(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    url = server.url.replace("http://", "http://alice:hunter2@") + "?api-key=QUERYKEY123"
    # A server that echoes the request line and the credentials it was sent.
    server.enqueue(
        Reply.error(401, message="bad key QUERYKEY123 for alice:hunter2 (api-key=QUERYKEY123)")
    )
    with pytest.raises(LLMStatusError) as caught:
        make_model(base_url=url, api_key_env=None).complete(HELLO)
    text = str(caught.value) + repr(caught.value) + caught.value.detail
    assert "QUERYKEY123" not in text
    assert "hunter2" not in text
    assert "bad key [redacted] for alice:[redacted]" in caught.value.detail
    assert str(caught.value.endpoint).endswith("/v1/chat/completions?api-key=***")


def test_httpx_log_line_does_not_show_secrets_of_the_base_url(
    server: ScriptedChatServer,
    sleeps: Sleeps,
    make_model: ModelFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # httpx logs every request's URL at INFO; an application logging at INFO must not
    # receive the password or the query key in it.
    caplog.set_level(logging.INFO)
    url = server.url.replace("http://", "http://alice:S3cretPassw0rd@") + "?api-key=QK-0987654"
    server.enqueue("fine")
    make_model(base_url=url, api_key_env=None).complete(HELLO)
    lines = [record.getMessage() for record in caplog.records if record.name == "httpx"]
    assert lines, "httpx logged no request line; the test would prove nothing"
    assert all("S3cretPassw0rd" not in line and "QK-0987654" not in line for line in lines)
    assert "alice:***@" in lines[0]
    assert "api-key=***" in lines[0]


def test_the_httpx_log_filter_leaves_other_records_alone(
    server: ScriptedChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    # A model whose secrets are short enough to occur anywhere: only its URL is redacted.
    url = server.url.replace("http://", "http://alice:1@") + "?key=2"
    OpenAICompatibleModel("m", base_url=url, api_key_env=None).close()
    with httpx.Client() as other:  # the host application's own client
        other.get(server.url + "/models?page=2")
    lines = [record.getMessage() for record in caplog.records if record.name == "httpx"]
    assert any("/v1/models?page=2" in line and "HTTP/1.1 404" in line for line in lines)


# --- lenient parsing ----------------------------------------------------------------


def test_content_as_a_list_of_blocks(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    blocks = [{"type": "text", "text": '{"a": '}, {"type": "text", "text": "1}"}]
    server.enqueue(Reply.text(blocks))
    assert make_model().complete(HELLO).text == '{"a": 1}'


def test_missing_usage_is_not_an_error(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(Reply.text("hi", usage=None))
    usage = make_model().complete(HELLO).usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (None,) * 3
    assert not usage.reported


def test_extra_fields_are_ignored_and_integer_usage_kept(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(
        {
            "id": "x",
            "system_fingerprint": "fp",
            "model": "deepseek-chat",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "hi", "reasoning_content": "..."},
                    "finish_reason": "length",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": 9,
                "completion_tokens": 1,
                "total_tokens": 10,
                "prompt_cache_hit_tokens": 8,
                "prompt_tokens_details": {"cached_tokens": 8},
                "ratio": 0.5,
            },
        }
    )
    response = make_model().complete(HELLO)
    assert response.text == "hi"
    assert response.truncated
    assert dict(response.usage.counts) == {
        "completion_tokens": 1,
        "prompt_cache_hit_tokens": 8,
        "prompt_tokens": 9,
        "total_tokens": 10,
    }


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"object": "error"}, "'choices' is missing"),
        ({"choices": []}, "'choices' is missing or empty"),
        ({"choices": [{"finish_reason": "stop"}]}, "choices[0].message is missing"),
        ({"choices": [{"message": {"content": None}}]}, "content is null"),
        ({"choices": [{"message": {"content": 42}}]}, "content is int"),
        (
            {"choices": [{"message": {"content": None, "refusal": "no"}}]},
            "refused",
        ),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_a_body_that_is_not_a_completion_fails_at_once(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory, body: object, reason: str
) -> None:
    server.enqueue(Reply.json(body))
    with pytest.raises(LLMResponseInvalid, match=r"cannot read") as caught:
        make_model().complete(HELLO)
    assert reason in caught.value.reason
    assert len(server.requests) == 1


def test_malformed_json_body_fails_at_once(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(Reply.raw('{"choices": [{"message": '), "never reached")
    with pytest.raises(LLMResponseInvalid, match="not valid JSON"):
        make_model().complete(HELLO)
    assert server.remaining == 1


NESTED = "[" * 100_000 + "]" * 100_000
"""JSON nested past the decoder's depth: ``json.loads`` raises ``RecursionError`` on it."""


def test_a_body_nested_too_deeply_is_not_a_completion(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    body = '{"x": ' + NESTED + ', "choices": [{"message": {"content": "hi"}}]}'
    server.enqueue(Reply.raw(body), "never reached")
    with pytest.raises(LLMResponseInvalid, match="not valid JSON"):
        make_model().complete(HELLO)
    assert server.remaining == 1


def test_an_error_body_nested_too_deeply_is_an_error_status_with_its_text(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(Reply.raw('{"error": ' + NESTED + "}", status=400))
    with pytest.raises(LLMStatusError) as caught:
        make_model().complete(HELLO)
    assert caught.value.status_code == 400
    assert caught.value.detail.startswith('{"error": [[[')
    assert len(caught.value.detail) == 300


def test_oversized_answer_is_refused(
    server: ScriptedChatServer,
    sleeps: Sleeps,
    make_model: ModelFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(openai, "MAX_RESPONSE_BYTES", 1000)
    server.enqueue(Reply.text("x" * 2000))
    with pytest.raises(LLMResponseInvalid, match="larger than 1000 bytes"):
        make_model().complete(HELLO)


# --- retries --------------------------------------------------------------------


def test_429_honours_retry_after(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(Reply.error(429, retry_after=7), Reply.error(429, retry_after="0.5"), "done")
    response = make_model().complete(HELLO)
    assert response.text == "done"
    assert response.attempts == 3
    assert sleeps == [7.0, 0.5]
    assert len({request.body for request in server.requests}) == 1  # the same payload each time


def test_retry_after_as_an_http_date(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    server.enqueue(Reply.error(429, retry_after=when), "done")
    make_model().complete(HELLO)
    assert 15 < sleeps[0] <= 20


def test_retry_after_ms_wins_over_retry_after(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(Reply.error(429, retry_after=9, headers={"retry-after-ms": "250"}), "done")
    make_model().complete(HELLO)
    assert sleeps == [0.25]


def test_retry_after_beyond_the_budget_ends_the_call(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(Reply.error(429, retry_after=120), "not reached")
    with pytest.raises(LLMStatusError) as caught:
        make_model().complete(HELLO)
    assert caught.value.status_code == 429
    assert caught.value.retry_after == 120
    assert caught.value.retryable
    assert "asked to wait 120 s" in str(caught.value)
    assert sleeps == []
    assert len(server.requests) == 1


def test_5xx_backs_off_exponentially_then_gives_up(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(Reply.error(500), Reply.error(502), Reply.error(503, message="busy"))
    with pytest.raises(LLMStatusError) as caught:
        make_model().complete(HELLO)
    error = caught.value
    assert (error.status_code, error.attempts) == (503, 3)
    assert "after 3 attempts" in str(error)
    assert "busy" in str(error)
    assert sleeps == [1.0, 2.0]


def test_total_wait_is_capped(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(Reply.error(500), Reply.error(500), Reply.error(500), "ok")
    retry = RetryPolicy(max_retries=5, backoff_seconds=2, max_total_wait_seconds=5)
    with pytest.raises(LLMStatusError):
        make_model(retry=retry).complete(HELLO)
    # 2, then 4 cut to the remaining 3, then the budget is spent.
    assert sleeps == [2.0, 3.0]
    assert sum(sleeps) <= 5


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_other_statuses_fail_at_once(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory, status: int
) -> None:
    server.enqueue(Reply.error(status, message="nope"), "not reached")
    with pytest.raises(LLMStatusError) as caught:
        make_model().complete(HELLO)
    assert caught.value.status_code == status
    assert not caught.value.retryable
    assert caught.value.attempts == 1
    assert f"HTTP {status}" in str(caught.value)
    assert "'test-model'" in str(caught.value)
    assert sleeps == []
    assert server.remaining == 1


def test_timeout_is_retried_then_raised(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(Reply.text("late", delay=3), Reply.text("late", delay=3))
    model = make_model(timeout_seconds=0.2, retry=RetryPolicy(max_retries=1, backoff_seconds=0))
    with pytest.raises(LLMTimeout) as caught:
        model.complete(HELLO)
    assert caught.value.attempts == 2
    assert "did not answer within 0.2 s" in str(caught.value)
    assert isinstance(caught.value, LLMTransportError)


def test_a_slow_answer_within_the_timeout_succeeds(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(Reply.text("late but fine", delay=0.2))
    assert make_model(timeout_seconds=3).complete(HELLO).text == "late but fine"


def test_timeout_then_success(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(Reply.text("late", delay=3), "on time")
    model = make_model(timeout_seconds=0.2)
    assert model.complete(HELLO).text == "on time"
    assert sleeps == [1.0]


def _trickling_server(head: bytes, pause: float) -> tuple[int, socket.socket]:
    """A server that sends ``head`` one byte every ``pause`` seconds, then stops.

    Every read the client makes gets a byte well within any per-read timeout, so
    only a deadline over the whole exchange can end the call.
    """
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            for byte in head:
                try:
                    connection.sendall(bytes([byte]))
                except OSError:  # the client gave up: the test is over
                    return
                time.sleep(pause)

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], listener


def test_a_server_trickling_its_headers_times_out_by_the_deadline(sleeps: Sleeps) -> None:
    # 300 header bytes at 0.1 s each would hold the call 30 s; the deadline is 1 s.
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Pad: " + b"a" * 300
    port, listener = _trickling_server(head, pause=0.1)
    model = OpenAICompatibleModel(
        "m",
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key_env=None,
        timeout_seconds=1,
        retry=RetryPolicy(max_retries=0),
        sleep=sleeps,
    )
    started = time.monotonic()
    with listener, model, pytest.raises(LLMTimeout) as caught:
        model.complete(HELLO)
    assert time.monotonic() - started < 10  # not a speed test: unbounded was ~30 s
    assert "did not answer within 1 s" in str(caught.value)


def test_an_invalid_url_at_request_time_is_a_deermem_error(sleeps: Sleeps) -> None:
    # The constructor refuses such a URL; should httpx still find one wrong when the
    # request is built, its InvalidURL (not an httpx.HTTPError) must not escape either.
    model = OpenAICompatibleModel("m", base_url="http://127.0.0.1:1/v1", api_key_env=None)
    model.endpoint = "http://127.0.0.1:abc/v1/chat/completions"
    with model, pytest.raises(LLMTransportError) as caught:
        model.complete(HELLO)
    assert caught.value.cause == "InvalidURL"


@pytest.mark.parametrize("url", ["http://127.0.0.1:abc/v1", "http://alice:S3cretPw@[::1/v1"])
def test_an_unparseable_base_url_is_refused_when_the_model_is_made(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        OpenAICompatibleModel("m", base_url=url, api_key_env=None)
    assert "model.base_url = " in str(caught.value)
    assert "S3cretPw" not in str(caught.value)


def test_dropped_connection_is_retried(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(Reply.drop_connection(), Reply.drop_connection(partial=b'{"choi'), "back")
    response = make_model().complete(HELLO)
    assert response.text == "back"
    assert response.attempts == 3


def test_dropped_connection_every_time_is_a_transport_error(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue(*[Reply.drop_connection()] * 3)
    with pytest.raises(LLMTransportError) as caught:
        make_model().complete(HELLO)
    assert caught.value.cause == "RemoteProtocolError"
    assert caught.value.attempts == 3
    assert not isinstance(caught.value, LLMTimeout)


def test_connection_refused_is_a_transport_error(sleeps: Sleeps) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAICompatibleModel(
        "m",
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key_env=None,
        retry=RetryPolicy(max_retries=1, backoff_seconds=0.5),
        sleep=sleeps,
    )
    with model, pytest.raises(LLMTransportError, match="could not reach") as caught:
        model.complete(HELLO)
    assert caught.value.cause == "ConnectError"
    assert sleeps == [0.5]


@pytest.mark.parametrize(
    "reply",
    [
        Reply.error(500),  # a status
        Reply.drop_connection(),  # a transport error
        Reply.raw("nope"),  # an unreadable body
        Reply.text("late", delay=2),  # a timeout
    ],
)
def test_every_failure_is_a_deermem_error_never_an_httpx_one(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory, reply: Reply
) -> None:
    server.enqueue(reply)
    model = make_model(retry=RetryPolicy(max_retries=0), timeout_seconds=0.2)
    with pytest.raises(LLMError) as caught:
        model.complete(HELLO)
    assert isinstance(caught.value, DeerMemError)
    assert not isinstance(caught.value, httpx.HTTPError)
    assert caught.value.model == "test-model"
    assert caught.value.attempts == 1


# --- structured output ----------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def test_json_schema_goes_in_response_format(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue('{"answer": "yes"}')
    response = make_model().complete(HELLO, json_schema=SCHEMA)
    assert json.loads(response.text) == {"answer": "yes"}
    assert server.requests[0].json()["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "strict": True, "schema": SCHEMA},
    }


def test_json_object_mode_for_deepseek_style_servers(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue("{}")
    make_model(structured_output="json_object").complete(HELLO, json_schema=SCHEMA)
    assert server.requests[0].json()["response_format"] == {"type": "json_object"}


def test_structured_output_off_sends_no_response_format(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue("{}")
    make_model(structured_output="none").complete(HELLO, json_schema=SCHEMA)
    assert "response_format" not in server.requests[0].json()


# --- the HTTP client -------------------------------------------------------------


def test_an_injected_client_is_used_and_left_open(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue("ok", "again")
    with httpx.Client(headers={"X-Agent": "my-agent"}) as http:
        model = make_model(http=http)
        model.complete(HELLO)
        model.close()
        assert not http.is_closed
        model.complete(HELLO)
    assert server.requests[0].headers["x-agent"] == "my-agent"


def test_an_owned_client_is_closed_with_the_model(
    server: ScriptedChatServer, sleeps: Sleeps, make_model: ModelFactory
) -> None:
    server.enqueue("ok")
    with make_model() as model:
        model.complete(HELLO)
    assert model._http.is_closed


@pytest.mark.parametrize("timeout", [0, -1, float("nan")])
def test_invalid_timeout_is_refused(timeout: float) -> None:
    with pytest.raises(ConfigError, match="timeout_seconds"):
        OpenAICompatibleModel("m", api_key_env=None, timeout_seconds=timeout)


def test_empty_model_name_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"model\.model is empty"):
        OpenAICompatibleModel("  ", api_key_env=None)
