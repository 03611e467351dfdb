"""The answer tasks of a QA run: one request per case and policy, and its fingerprint.

For every case and each policy, the production selector runs at the protocol's
QA capacity; the facts it keeps become the stored memory of one chat request
(rendered by the protocol's answer prompt, reference ``eval-harness-spec.md``
§2.4). 45 cases × 2 policies give the 90 tasks of ``run-qa``, in case order,
``confidence`` before ``hybrid-v1``.

**The request fingerprint** (reference §4.2) is the hex SHA-256 of the exact
request body — ``model``, ``temperature`` (a float), ``max_tokens``,
``stream`` and the two messages — serialised by ``json.dumps`` with sorted keys,
``ensure_ascii=False`` and the default separators, encoded as UTF-8. The key,
the endpoint, the timeout, the retries and the worker count are not part of
it. Every stored answer carries the fingerprint of the request it answered, so
``run-qa`` (resuming) and ``grade-qa`` can prove, by recomputing the task from
the protocol and the dataset, that an answer belongs to *this* memory under
*this* prompt and model settings.

The fingerprint is computed here rather than imported from
:mod:`deermem.llm`, whose import brings in the HTTP stack that grading does
not need; the two definitions are the same function of the payload (a test
holds them together), and ``run-qa`` sends exactly the payload it hashed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Final, NamedTuple

from deermem.eval.errors import EvaluationError
from deermem.eval.policy_run.run import decide
from deermem.eval.protocol.bundle import POLICY_ORDER, Protocol
from deermem.eval.protocol.cases import EvaluationCase

__all__ = [
    "ROW_ID_SEPARATOR",
    "AnswerTask",
    "RequestSettings",
    "build_answer_tasks",
    "request_fingerprint",
    "request_payload",
    "row_id_for",
]

ROW_ID_SEPARATOR: Final = "__"


class RequestSettings(NamedTuple):
    """The request parameters a QA run sends with every question.

    Attributes:
        model: the model name sent in the request (the config's ``qa.model``,
            or the local model's name with ``--provider local``).
        temperature: sent as a float, so ``0`` in the config becomes ``0.0``.
        max_tokens: the answer's token limit.
        stream: always false (the contract load refuses anything else).
    """

    model: str
    temperature: float
    max_tokens: int
    stream: bool = False

    @classmethod
    def from_protocol(cls, protocol: Protocol, *, model: str | None = None) -> RequestSettings:
        """The protocol's settings, optionally for another model name."""
        qa = protocol.config.qa
        return cls(
            model=qa.model if model is None else model,
            temperature=float(qa.temperature),
            max_tokens=qa.max_tokens,
            stream=qa.stream,
        )


class AnswerTask(NamedTuple):
    """One question to answer: a case under one policy at the QA capacity.

    Attributes:
        row_id: ``<case_id>__<policy>``.
        kept_fact_ids: the facts the selector kept, in rank order.
        payload: the exact request body (treat as read-only).
        fingerprint: :func:`request_fingerprint` of ``payload``.
    """

    row_id: str
    case: EvaluationCase
    policy: str
    capacity: int
    kept_fact_ids: tuple[str, ...]
    payload: Mapping[str, object]
    fingerprint: str

    @property
    def messages(self) -> list[dict[str, str]]:
        """The request's chat messages (``role`` and ``content``)."""
        messages = self.payload["messages"]
        assert isinstance(messages, list)
        return messages


def row_id_for(case_id: str, policy: str) -> str:
    """The row id of a case under a policy: ``<case_id>__<policy>``."""
    return f"{case_id}{ROW_ID_SEPARATOR}{policy}"


def request_payload(
    settings: RequestSettings, messages: Sequence[Mapping[str, str]]
) -> dict[str, object]:
    """The request body: the settings and the messages, nothing else."""
    return {
        "model": settings.model,
        "temperature": float(settings.temperature),
        "max_tokens": settings.max_tokens,
        "stream": settings.stream,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
    }


def request_fingerprint(payload: Mapping[str, object]) -> str:
    """The hex SHA-256 of a request body as reference §4.2 defines it."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_answer_tasks(
    protocol: Protocol, cases: Sequence[EvaluationCase], settings: RequestSettings
) -> tuple[AnswerTask, ...]:
    """Every task of the run, in case order and, per case, in policy order.

    Raises:
        EvaluationError: two tasks would share a row id, or the selector kept
            no fact (an answer prompt needs at least one).
    """
    capacity = protocol.config.pool.qa_capacity
    template = protocol.answer_template
    tasks: list[AnswerTask] = []
    for case in cases:
        contents = {str(fact["id"]): str(fact["content"]) for fact in case.facts}
        for policy in POLICY_ORDER:
            kept = decide(protocol, case, policy, capacity).kept_ids
            messages = template.render(
                question=case.question,
                question_date=case.question_date,
                facts=[(fact_id, contents[fact_id]) for fact_id in kept],
            )
            payload = request_payload(settings, messages)
            tasks.append(
                AnswerTask(
                    row_id=row_id_for(case.case_id, policy),
                    case=case,
                    policy=policy,
                    capacity=capacity,
                    kept_fact_ids=kept,
                    payload=payload,
                    fingerprint=request_fingerprint(payload),
                )
            )
    seen: set[str] = set()
    for task in tasks:
        if task.row_id in seen:
            raise EvaluationError(f"two answer tasks share the row id {task.row_id!r}")
        seen.add(task.row_id)
    return tuple(tasks)
