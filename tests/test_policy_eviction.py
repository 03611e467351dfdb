"""The capacity policies: the original's eviction behaviours and the seed's numbers."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deermem import (
    POLICY_CONFIDENCE,
    POLICY_HYBRID_V1,
    Fact,
    MemoryConfig,
    select_facts_for_capacity,
)
from deermem.model import format_timestamp
from deermem.policy import (
    access_heat,
    coerce_confidence,
    confirmation_freshness,
    reserved_slot_count,
)

NOW = datetime(2026, 8, 13, tzinfo=UTC)


def ago(days: float) -> str:
    return format_timestamp(NOW - timedelta(days=days))


def fact(fact_id: str, confidence: object, **extra: object) -> dict[str, object]:
    return {"id": fact_id, "confidence": confidence, "category": "preference", **extra}


# --- confidence -------------------------------------------------------------------


def test_confidence_policy_keeps_highest_in_rank_order() -> None:
    facts = [fact("low", 0.2), fact("high", 0.9), fact("mid", 0.5), fact("top", 0.95)]
    decision = select_facts_for_capacity(facts, max_facts=2, policy=POLICY_CONFIDENCE)
    assert decision.kept_ids == ("top", "high")
    assert decision.evicted_ids == ("low", "mid")  # lowest first
    assert decision.evicted[0].components == {"confidence": 0.2}
    assert decision.reserved_correction_slots == 0


def test_confidence_policy_coerces_unreadable_confidence() -> None:
    facts = [fact("none", None), fact("text", "0.9"), fact("junk", "high"), fact("flag", True)]
    decision = select_facts_for_capacity(facts, max_facts=1, policy=POLICY_CONFIDENCE)
    assert decision.kept_ids == ("text",)
    assert {decision.scores[i].score for i in ("none", "junk", "flag")} == {0.5}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, 0.5),  # missing
        (True, 0.5),  # bool is not a confidence
        ("0.9", 0.9),  # numeric string parses
        ("abc", 0.5),  # garbage
        (math.inf, 0.5),  # not finite
        (math.nan, 0.5),  # not finite
        ("nan", 0.5),  # not finite, from a string
        (1.7, 1.0),  # clamped high
        (-3, 0.0),  # clamped low
        ([0.9], 0.5),  # wrong type
        (1, 1.0),  # integers are numbers
    ],
)
def test_coerce_confidence(raw: object, expected: float) -> None:
    assert coerce_confidence(raw) == expected


@pytest.mark.parametrize("policy", [POLICY_CONFIDENCE, POLICY_HYBRID_V1])
def test_at_or_below_cap_keeps_input_unchanged(policy: str) -> None:
    facts = [fact("b", 0.1), fact("a", 0.9), fact("c", 0.5)]
    for cap in (3, 4, 100):
        decision = select_facts_for_capacity(facts, max_facts=cap, policy=policy, now=NOW)
        assert decision.kept == tuple(facts)
        assert decision.evicted == ()


# --- hybrid-v1 --------------------------------------------------------------------


def test_seed_numbers() -> None:
    stale = confirmation_freshness(None, ago(180), NOW, 90)
    confirmed = confirmation_freshness(ago(7), ago(200), NOW, 90)
    assert stale == 0.125
    assert confirmed == pytest.approx(0.95, abs=0.005)
    assert confirmed == 0.9475160078148386  # the evaluation's pinned value
    assert 0.65 * 0.9 + 0.25 * stale == pytest.approx(0.62, abs=0.005)
    assert 0.65 * 0.7 + 0.25 * confirmed == pytest.approx(0.69, abs=0.005)
    assert confirmation_freshness(None, ago(30), NOW, 90) == 0.3968502629920499


def test_hybrid_keeps_recently_confirmed_over_stale_high_confidence() -> None:
    facts = [
        fact("stale", 0.9, createdAt=ago(180)),
        fact("confirmed", 0.7, createdAt=ago(200), lastConfirmedAt=ago(7)),
    ]
    hybrid = select_facts_for_capacity(facts, max_facts=1, policy=POLICY_HYBRID_V1, now=NOW)
    assert hybrid.kept_ids == ("confirmed",)
    [evicted] = hybrid.evicted
    assert evicted.fact_id == "stale"
    assert evicted.components["confirmationFreshness"] < 0.13
    assert evicted.components["confidence"] == 0.9
    assert evicted.score == 0.6162500000000001
    assert hybrid.scores["confirmed"].score == 0.6918790019537095
    plain = select_facts_for_capacity(facts, max_facts=1, policy=POLICY_CONFIDENCE)
    assert plain.kept_ids == ("stale",)


def test_hybrid_access_heat_is_bounded() -> None:
    usage = {"recalled": {"accessHeat": 1e12, "accessCount": 5, "lastAccessedAt": ago(0)}}
    facts = [fact("unused", 0.75, createdAt=ago(10)), fact("recalled", 0.7, createdAt=ago(10))]
    decision = select_facts_for_capacity(
        facts, max_facts=1, policy=POLICY_HYBRID_V1, usage=usage, now=NOW
    )
    assert decision.kept_ids == ("recalled",)
    assert decision.scores["recalled"].components["accessHeat"] == 1.0


def test_heat_saturates_at_eight_and_decays_with_half_life() -> None:
    assert access_heat({"accessHeat": 8, "lastAccessedAt": ago(0)}, NOW, 30) == 1.0
    assert access_heat({"accessHeat": 100, "lastAccessedAt": ago(0)}, NOW, 30) == 1.0
    half = access_heat({"accessHeat": 8, "lastAccessedAt": ago(30)}, NOW, 30)
    assert half == min(1.0, math.log1p(4.0) / math.log(9))
    for malformed in (
        None,
        "hot",
        {},
        {"accessHeat": -1, "lastAccessedAt": ago(0)},
        {"accessHeat": True, "lastAccessedAt": ago(0)},
        {"accessHeat": "8", "lastAccessedAt": ago(0)},
        {"accessHeat": 8, "lastAccessedAt": "soon"},
        {"accessHeat": math.inf, "lastAccessedAt": ago(0)},
    ):
        assert access_heat(malformed, NOW, 30) == 0.0


def test_hybrid_reserves_bounded_correction_capacity() -> None:
    facts = [fact(f"pref{i}", 0.95, createdAt=ago(1)) for i in range(10)]
    facts.append({"id": "fix", "category": "correction", "confidence": 0.1, "createdAt": ago(1)})
    decision = select_facts_for_capacity(facts, max_facts=10, policy=POLICY_HYBRID_V1, now=NOW)
    assert "fix" in decision.kept_ids
    assert decision.reserved_correction_slots == 1
    assert decision.evicted_ids == ("pref9",)  # the lowest-ranked preference (last by input)
    confidence = select_facts_for_capacity(facts, max_facts=10, policy=POLICY_CONFIDENCE)
    assert confidence.evicted_ids == ("fix",)


def test_hybrid_releases_unused_correction_slots() -> None:
    facts = [fact(f"p{i}", 0.5 + i / 100, createdAt=ago(1)) for i in range(11)]
    decision = select_facts_for_capacity(facts, max_facts=10, policy=POLICY_HYBRID_V1, now=NOW)
    assert decision.reserved_correction_slots == 0
    assert len(decision.kept) == 10
    assert decision.evicted_ids == ("p0",)


def test_corrections_beyond_the_reserve_compete_normally() -> None:
    corrections = [
        {"id": f"c{i}", "category": " Correction ", "confidence": 0.1, "createdAt": ago(1)}
        for i in range(3)
    ]
    prefs = [fact(f"p{i}", 0.9, createdAt=ago(1)) for i in range(10)]
    decision = select_facts_for_capacity(
        prefs + corrections, max_facts=10, policy=POLICY_HYBRID_V1, now=NOW
    )
    assert decision.reserved_correction_slots == 1
    assert [i for i in decision.kept_ids if i.startswith("c")] == ["c0"]


def test_reserved_categories_come_from_the_rule_table() -> None:
    facts = [fact(f"p{i}", 0.9, createdAt=ago(1)) for i in range(10)]
    facts.append({"id": "g", "category": "goal", "confidence": 0.1, "createdAt": ago(1)})
    default = select_facts_for_capacity(facts, max_facts=10, policy=POLICY_HYBRID_V1, now=NOW)
    assert "g" in default.evicted_ids
    configured = select_facts_for_capacity(
        facts, max_facts=10, policy=POLICY_HYBRID_V1, now=NOW, reserved_categories=["Goal"]
    )
    assert "g" in configured.kept_ids


def test_hybrid_handles_malformed_timestamps() -> None:
    facts = [
        fact("a", 0.9, createdAt="not a date", lastConfirmedAt="later"),
        fact("b", 0.8, createdAt=12345),
        fact("c", 0.7),
    ]
    decision = select_facts_for_capacity(facts, max_facts=1, policy=POLICY_HYBRID_V1, now=NOW)
    for fact_id in "abc":
        assert decision.scores[fact_id].components["confirmationFreshness"] == 0.0
    assert decision.kept_ids == ("a",)


def test_unparseable_confirmation_falls_back_to_creation() -> None:
    assert confirmation_freshness("garbage", ago(180), NOW, 90) == 0.125


def test_future_timestamps_do_not_decay() -> None:
    assert confirmation_freshness(ago(-5), None, NOW, 90) == 1.0
    assert confirmation_freshness(None, ago(-5), NOW, 90) == 0.5


def test_hybrid_needs_the_clock() -> None:
    facts = [fact("a", 0.5), fact("b", 0.6)]
    with pytest.raises(ValueError, match="now="):
        select_facts_for_capacity(facts, max_facts=1, policy=POLICY_HYBRID_V1)


def test_naive_clock_is_utc() -> None:
    facts = [fact("a", 0.5, createdAt=ago(90)), fact("b", 0.6)]
    aware = select_facts_for_capacity(facts, max_facts=1, policy=POLICY_HYBRID_V1, now=NOW)
    naive = select_facts_for_capacity(
        facts, max_facts=1, policy=POLICY_HYBRID_V1, now=NOW.replace(tzinfo=None)
    )
    assert dict(aware.scores) == dict(naive.scores)


def test_policy_is_opt_in_with_the_original_defaults() -> None:
    config = MemoryConfig()
    assert config.fact_eviction_policy == POLICY_CONFIDENCE
    assert (
        config.eviction_confidence_weight,
        config.eviction_confirmation_weight,
        config.eviction_access_weight,
    ) == (0.65, 0.25, 0.10)
    assert config.protected_categories == ("correction",)


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"policy": "lru"}, "unknown eviction policy"),
        ({"max_facts": -1}, "max_facts"),
        ({"access_weight": 0.2}, "confidence_weight=0.65 .* access_weight=0.2"),
        ({"confirmation_half_life_days": 0}, "half-lives"),
        ({"correction_reserved_fraction": 1.5}, "fraction"),
        ({"correction_reserved_max": -2}, "correction_reserved_max"),
    ],
)
def test_invalid_arguments_are_refused(keywords: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"max_facts": 1, "policy": POLICY_HYBRID_V1, "now": NOW}
    arguments.update(keywords)
    with pytest.raises(ValueError, match=message):
        select_facts_for_capacity([fact("a", 1), fact("b", 1)], **arguments)  # type: ignore[arg-type]


# --- the seed's two situations, at caps 10 and 100 ------------------------------------


@pytest.mark.parametrize("cap", [10, 100])
def test_stale_high_vs_recently_confirmed(cap: int) -> None:
    background = [fact(f"bg{i:03d}", 0.95, createdAt=ago(20)) for i in range(cap - 1)]
    facts = [
        *background,
        fact("stale", 0.9, createdAt=ago(180)),
        fact("confirmed", 0.7, createdAt=ago(60), lastConfirmedAt=ago(7)),
    ]
    plain = select_facts_for_capacity(facts, max_facts=cap, policy=POLICY_CONFIDENCE)
    hybrid = select_facts_for_capacity(facts, max_facts=cap, policy=POLICY_HYBRID_V1, now=NOW)
    assert plain.evicted_ids == ("confirmed",)
    assert hybrid.evicted_ids == ("stale",)


@pytest.mark.parametrize("cap", [10, 100])
def test_one_correction_vs_many_preferences(cap: int) -> None:
    preferences = [fact(f"pref{i:03d}", 0.9, createdAt=ago(10)) for i in range(cap)]
    correction = {"id": "uv", "category": "correction", "confidence": 0.7, "createdAt": ago(30)}
    facts = [correction, *preferences]
    plain = select_facts_for_capacity(facts, max_facts=cap, policy=POLICY_CONFIDENCE)
    hybrid = select_facts_for_capacity(facts, max_facts=cap, policy=POLICY_HYBRID_V1, now=NOW)
    assert plain.evicted_ids == ("uv",)
    assert "uv" in hybrid.kept_ids
    assert hybrid.reserved_correction_slots == 1
    [evicted] = hybrid.evicted
    assert evicted.fact_id == f"pref{cap - 1:03d}"
    assert evicted.margin is not None
    assert evicted.margin < 0  # a lower-scored correction kept its reserved slot


# --- explanations, types and arithmetic --------------------------------------------


def test_evicted_records_rank_and_margin() -> None:
    facts = [fact("a", 0.9), fact("b", 0.8), fact("c", 0.3), fact("d", 0.1)]
    decision = select_facts_for_capacity(facts, max_facts=2, policy=POLICY_CONFIDENCE)
    assert [(e.fact_id, e.rank) for e in decision.evicted] == [("d", 4), ("c", 3)]
    assert decision.evicted[1].margin == 0.8 - 0.3
    assert decision.occupancy == 4


def test_zero_cap_evicts_everything_without_margin() -> None:
    decision = select_facts_for_capacity([fact("a", 0.9)], max_facts=0, policy=POLICY_CONFIDENCE)
    assert decision.kept == ()
    assert decision.evicted[0].margin is None


def test_missing_category_is_reported_as_context() -> None:
    decision = select_facts_for_capacity(
        [{"id": "x", "confidence": 0.1}, fact("y", 0.9)], max_facts=1, policy=POLICY_CONFIDENCE
    )
    assert decision.evicted[0].category == "context"


def test_fact_objects_are_accepted_and_returned() -> None:
    objects = [
        Fact.from_dict({"id": "a", "content": "x", "confidence": 0.2, "createdAt": ago(1)}),
        Fact.from_dict(
            {
                "id": "b",
                "content": "y",
                "category": "correction",
                "confidence": 0.1,
                "createdAt": ago(1),
            }
        ),
        Fact.from_dict({"id": "c", "content": "z", "confidence": 0.9, "createdAt": ago(1)}),
    ]
    decision = select_facts_for_capacity(
        objects, max_facts=2, policy=POLICY_HYBRID_V1, now=NOW, correction_reserved_max=1
    )
    assert decision.kept == (objects[2], objects[1])
    assert decision.evicted_ids == ("a",)


@pytest.mark.parametrize(
    ("cap", "fraction", "maximum", "expected"),
    [
        (5, 0.1, 10, 1),
        (7, 0.1, 10, 1),
        (9, 0.1, 10, 1),
        (100, 0.1, 10, 10),
        (500, 0.1, 10, 10),  # bounded by the maximum
        (30, 0.1, 10, 3),  # exact: binary floats would give 4
        (10, 0.0, 10, 0),
        (10, 0.25, 10, 3),
    ],
)
def test_reserved_slot_count(cap: int, fraction: float, maximum: int, expected: int) -> None:
    assert reserved_slot_count(cap, fraction, maximum) == expected


@given(
    cap=st.integers(min_value=0, max_value=10**6),
    fraction=st.floats(min_value=0.0, max_value=1.0)
    | st.floats(allow_nan=False, allow_infinity=False),
    maximum=st.integers(min_value=0, max_value=10**6),
)
def test_reserved_slot_count_is_exact_decimal_arithmetic(
    cap: int, fraction: float, maximum: int
) -> None:
    # The definition: the fraction as written (its repr), multiplied exactly.
    expected = min(maximum, math.ceil(cap * Fraction(repr(fraction))))
    assert reserved_slot_count(cap, fraction, maximum) == expected


def _reference_score(fact_data: dict[str, object], usage: dict[str, object] | None) -> float:
    """The contract's arithmetic, written out independently (ARCHITECTURE §5)."""

    def parse(value: object) -> datetime | None:
        if not isinstance(value, str):
            return None
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

    c = coerce_confidence(fact_data.get("confidence"))
    confirmed, created = parse(fact_data.get("lastConfirmedAt")), parse(fact_data.get("createdAt"))
    if confirmed is not None:
        f = 2 ** (-max(0, (NOW - confirmed).total_seconds() / 86400) / 90)
    elif created is not None:
        f = 0.5 * 2 ** (-max(0, (NOW - created).total_seconds() / 86400) / 90)
    else:
        f = 0.0
    a = 0.0
    if usage:
        h = usage["accessHeat"]
        accessed = parse(usage["lastAccessedAt"])
        assert isinstance(h, float)
        assert accessed is not None
        decay = 2 ** (-max(0, (NOW - accessed).total_seconds() / 86400) / 30)
        a = min(1.0, math.log1p(h * decay) / math.log(9))
    return 0.65 * c + 0.25 * f + 0.10 * a


def test_scores_are_bit_identical_to_the_contract_arithmetic() -> None:
    facts: list[dict[str, object]] = []
    usage: dict[str, dict[str, object]] = {}
    for i in range(300):
        facts.append(
            fact(
                f"f{i}",
                (i * 37 % 101) / 100,
                createdAt=format_timestamp(NOW - timedelta(seconds=i * 7919.123)),
                lastConfirmedAt=ago(i / 3.7) if i % 3 == 0 else None,
            )
        )
        if i % 2 == 0:
            usage[f"f{i}"] = {"accessHeat": i / 7, "lastAccessedAt": ago(i / 11)}
    decision = select_facts_for_capacity(
        facts, max_facts=10, policy=POLICY_HYBRID_V1, usage=usage, now=NOW
    )
    for item in facts:
        fact_id = str(item["id"])
        expected = _reference_score(item, usage.get(fact_id))
        assert decision.scores[fact_id].score == expected  # exact equality, not approx
