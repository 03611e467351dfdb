"""Properties of the update path that must hold for any input (hypothesis)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deermem.learning.answer import (
    NormalizedResponse,
    NoUpdate,
    RejectedResponse,
    UpdatePayload,
    normalize_response,
    parse_update_response,
)
from deermem.learning.plan import UpdateSettings, plan_update
from deermem.learning.prompt import ConversationTurn, format_conversation
from deermem.learning.queue import mark_of, messages_after
from deermem.model import parse_timestamp
from tests.update_support import NOW, counting_ids, fact, state

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=30,
)
labels = st.sampled_from(
    [
        None,
        "user",
        "USER ",
        "thread",
        "project",
        "durable",
        "transient",
        "descriptive",
        "transactional",
        3,
        "",
    ]
)
new_fact_entries = st.fixed_dictionaries(
    {
        "content": st.one_of(st.text(max_size=30), st.integers(), st.none()),
        "confidence": st.one_of(
            st.floats(), st.integers(-1, 2), st.text(max_size=5), st.booleans()
        ),
        "category": st.one_of(
            st.sampled_from(["preference", "correction", "", "knowledge"]), st.integers()
        ),
        "scope": labels,
        "durability": labels,
        "authority": labels,
    }
)
removal_entries = st.one_of(
    st.text(max_size=8),
    st.fixed_dictionaries(
        {
            "id": st.sampled_from(["f0", "f1", "f2", "f3", "ghost", ""]),
            "scope": labels,
            "reason": st.sampled_from(["", "wrong now"]),
            "replacementFactIndex": st.one_of(st.none(), st.integers(-2, 6), st.booleans()),
        }
    ),
)
ids = st.sampled_from(["f0", "f1", "f2", "f3", "f4", "f5", "ghost"])
responses = st.fixed_dictionaries(
    {
        "user": st.one_of(json_values, st.just({})),
        "history": st.just({}),
        "newFacts": st.one_of(st.lists(new_fact_entries, max_size=6), json_values),
        "factsToRemove": st.lists(removal_entries, max_size=3),
        "factsToReinforce": st.lists(
            st.fixed_dictionaries(
                {"id": ids, "scope": labels, "reason": st.sampled_from(["", "yes"])}
            ),
            max_size=3,
        ),
        "staleFactsToRemove": st.lists(st.fixed_dictionaries({"id": ids}), max_size=6),
        "staleFactsToExtend": st.lists(
            st.fixed_dictionaries({"id": ids, "extend_by_days": st.integers(-5, 10**6)}), max_size=3
        ),
    }
)
libraries = st.lists(
    st.tuples(
        st.sampled_from(["correction", "preference", "goal", "Correction", "context"]),
        st.integers(0, 800),
        st.floats(0, 1),
    ),
    max_size=6,
).map(
    lambda rows: state(
        *(
            fact(f"f{i}", f"fact {i}", category=c, age_days=age, confidence=conf)
            for i, (c, age, conf) in enumerate(rows)
        )
    )
)


@FAST
@given(st.text(max_size=400) | st.binary(max_size=50).map(repr))
def test_parsing_never_raises_on_text(text: str) -> None:
    assert isinstance(parse_update_response(text), UpdatePayload | NoUpdate)


@FAST
@given(json_values)
def test_parsing_never_raises_on_any_json_value(value: Any) -> None:
    assert isinstance(parse_update_response(json.dumps(value)), UpdatePayload | NoUpdate)
    assert isinstance(parse_update_response(value), UpdatePayload | NoUpdate)


@FAST
@given(responses, st.dictionaries(st.text(max_size=10), json_values, max_size=3))
def test_normalisation_never_raises_and_is_idempotent(
    response: dict[str, Any], extra: dict[str, Any]
) -> None:
    result = normalize_response({**extra, **response})
    if isinstance(result, RejectedResponse):
        assert result.reason == "removals-with-malformed-facts"  # history is always an object
        assert result.removals > 0
        assert result.malformed_new_facts != 0
        return
    again = normalize_response(result.to_payload())
    assert isinstance(again, NormalizedResponse)
    assert again == result
    assert json.loads(json.dumps(result.to_payload())) == result.to_payload()


FIELD_TYPES = {
    "user": dict,
    "history": dict,
    "newFacts": list,
    "factsToReinforce": list,
    "factsToRemove": list,
    "staleFactsToRemove": list,
    "staleFactsToExtend": list,
}


@FAST
@given(st.dictionaries(st.sampled_from(sorted(FIELD_TYPES)), json_values, max_size=7))
def test_an_answer_is_refused_as_unreadable_exactly_when_no_field_has_its_type(
    data: dict[str, Any],
) -> None:
    result = normalize_response(data)
    readable = any(isinstance(data.get(name), kind) for name, kind in FIELD_TYPES.items())
    unreadable = isinstance(result, RejectedResponse) and result.reason == "wrong-field-types"
    assert unreadable == (not readable)


@FAST
@given(libraries, responses, st.frozensets(st.sampled_from(["reinforcement", "correction"])))
def test_plans_respect_every_gate(memory, response, signals):
    normalized = normalize_response(response)
    if not isinstance(normalized, NormalizedResponse):
        return
    config = UpdateSettings(staleness_max_removals_per_cycle=2)
    plan = plan_update(
        memory,
        normalized,
        signals=signals,
        settings=config,
        now=NOW,
        thread_id="t",
        new_id=counting_ids(),
    )
    by_content: dict[str, list[Any]] = {}
    for proposal in normalized.new_facts:
        by_content.setdefault(proposal.content.strip(), []).append(proposal)
    for created in plan.new_facts:
        # The gate never admits an unlabelled or low-confidence fact.
        assert any(
            (p.scope, p.durability, p.authority) == ("user", "durable", "descriptive")
            and p.confidence >= config.fact_confidence_threshold
            for p in by_content[created.content]
        )
    stored = {f.id: f for f in memory.facts}
    for fact_id in plan.stale_removals:
        # Staleness never removes a protected or a fresh fact, nor more than the cap.
        assert stored[fact_id].category != "correction"
        born = parse_timestamp(stored[fact_id].createdAt)
        assert born is not None
        assert NOW - born > timedelta(days=90)
    assert len(plan.stale_removals) <= 2
    if "reinforcement" not in signals:
        assert plan.confirmed == ()
    ids_out = [f.id for f in plan.facts]
    assert len(ids_out) == len(set(ids_out))
    again = plan_update(
        memory,
        normalized,
        signals=signals,
        settings=config,
        now=NOW,
        thread_id="t",
        new_id=counting_ids(),
    )
    assert again == plan


@FAST
@given(st.lists(st.tuples(st.sampled_from(["human", "ai"]), st.text(max_size=1500)), max_size=5))
def test_no_turn_can_close_the_conversation_block(rows: list[tuple[str, str]]) -> None:
    text = format_conversation([ConversationTurn(role, body) for role, body in rows])  # type: ignore[arg-type]
    assert "<" not in text
    assert ">" not in text


@FAST
@given(st.lists(st.text(max_size=3), max_size=8), st.lists(st.text(max_size=3), max_size=8))
def test_the_watermark_feeds_a_suffix_and_never_loses_new_turns(
    old: list[str], new: list[str]
) -> None:
    first = [ConversationTurn("human", t, id=f"o{i}") for i, t in enumerate(old)]
    later = first + [ConversationTurn("ai", t, id=f"n{i}") for i, t in enumerate(new)]
    feed = messages_after(later, mark_of(first[-1]) if first else None)
    assert list(feed) == later[len(later) - len(feed) :]
    assert list(feed[len(feed) - len(new) :] if new else []) == later[len(first) :]
