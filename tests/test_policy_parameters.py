"""CapacityPolicy: the one value that carries a policy's name and parameters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from deermem import POLICY_CONFIDENCE, POLICY_HYBRID_V1, select_facts_for_capacity
from deermem.model import format_timestamp
from deermem.policy import CapacityPolicy

NOW = datetime(2026, 8, 13, tzinfo=UTC)


def library() -> tuple[list[dict[str, object]], dict[str, dict[str, object]]]:
    facts: list[dict[str, object]] = [
        {
            "id": f"f{i}",
            "category": "correction" if i % 5 == 0 else "goal",
            "confidence": (i * 37 % 11) / 10,
            "createdAt": format_timestamp(NOW - timedelta(days=i * 9.5)),
        }
        for i in range(40)
    ]
    usage = {"f3": {"accessHeat": 6.0, "lastAccessedAt": format_timestamp(NOW)}}
    return facts, usage


def test_the_defaults_are_the_originals() -> None:
    policy = CapacityPolicy()
    assert policy.name == POLICY_CONFIDENCE
    assert (policy.confidence_weight, policy.confirmation_weight, policy.access_weight) == (
        0.65,
        0.25,
        0.10,
    )
    assert (policy.confirmation_half_life_days, policy.access_half_life_days) == (90, 30)
    assert (policy.correction_reserved_fraction, policy.correction_reserved_max) == (0.10, 10)
    assert policy.reserved_categories == ("correction",)
    assert not policy.shadow_enabled


@pytest.mark.parametrize("name", [POLICY_CONFIDENCE, POLICY_HYBRID_V1])
def test_a_policy_decides_as_its_name_with_the_same_keywords(name: str) -> None:
    facts, usage = library()
    keywords = {
        "confidence_weight": 0.5,
        "confirmation_weight": 0.2,
        "access_weight": 0.3,
        "confirmation_half_life_days": 45,
        "access_half_life_days": 7,
        "correction_reserved_fraction": 0.25,
        "correction_reserved_max": 3,
    }
    by_name = select_facts_for_capacity(
        facts,
        max_facts=12,
        policy=name,
        usage=usage,
        now=NOW,
        reserved_categories=["Goal"],
        **keywords,  # type: ignore[arg-type]
    )
    as_object = select_facts_for_capacity(
        facts,
        max_facts=12,
        policy=CapacityPolicy(name=name, reserved_categories=("Goal",), **keywords),  # type: ignore[arg-type]
        usage=usage,
        now=NOW,
    )
    assert by_name == as_object
    assert dict(by_name.scores) == dict(as_object.scores)
    assert as_object.policy == name


def test_a_name_without_keywords_takes_the_defaults() -> None:
    facts, usage = library()
    assert select_facts_for_capacity(
        facts, max_facts=12, policy=POLICY_HYBRID_V1, usage=usage, now=NOW
    ) == select_facts_for_capacity(
        facts, max_facts=12, policy=CapacityPolicy(name=POLICY_HYBRID_V1), usage=usage, now=NOW
    )


def test_a_policy_object_with_keywords_is_refused() -> None:
    facts, _ = library()
    with pytest.raises(TypeError, match="access_weight, confidence_weight"):
        select_facts_for_capacity(
            facts,
            max_facts=12,
            policy=CapacityPolicy(),
            confidence_weight=0.9,
            access_weight=0.0,
        )


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"name": "lru"}, "unknown eviction policy 'lru'"),
        (
            {"confidence_weight": 0.6},
            r"confidence_weight=0.6 \+ confirmation_weight=0.25 \+ access_weight=0.1",
        ),
        (
            {"confidence_weight": 0.8, "access_weight": -0.05},
            "must be non-negative",
        ),
        ({"access_half_life_days": 0}, r"half-lives must be positive, got \[90, 0\]"),
        ({"confirmation_half_life_days": float("nan")}, "confirmation_half_life_days .* nan"),
        # Not numbers: named, as a ValueError, before any comparison could raise a bare
        # TypeError or read a bool as 0 or 1.
        ({"confidence_weight": "0.65"}, "confidence_weight must be a finite number, got '0.65'"),
        ({"access_half_life_days": None}, "access_half_life_days must be .*, got None"),
        ({"correction_reserved_fraction": "0.1"}, "correction_reserved_fraction .* '0.1'"),
        ({"access_weight": True}, "access_weight must be a finite number, got True"),
        ({"confirmation_half_life_days": 10**400}, "confirmation_half_life_days must be"),
        ({"correction_reserved_fraction": 1.5}, "correction_reserved_fraction .* 1.5"),
        ({"correction_reserved_max": -1}, "correction_reserved_max .* -1"),
        ({"correction_reserved_max": True}, "correction_reserved_max .* True"),
        ({"reserved_categories": "correction"}, "reserved_categories .* 'correction'"),
    ],
)
def test_bad_parameters_are_refused_when_the_policy_is_built(
    parameters: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        CapacityPolicy(**parameters)  # type: ignore[arg-type]


def test_a_bad_keyword_of_the_pure_function_is_refused_by_name() -> None:
    facts = [{"id": "a"}, {"id": "b"}]
    with pytest.raises(ValueError, match=r"access_weight must be a finite number, got '0\.1'"):
        select_facts_for_capacity(
            facts,
            max_facts=1,
            policy=POLICY_HYBRID_V1,
            access_weight="0.1",  # type: ignore[arg-type]
            now=datetime(2026, 8, 13, tzinfo=UTC),
        )


def test_one_category_name_as_a_string_is_refused_not_read_as_letters() -> None:
    # A str is a Collection[str]: read as letters, 'correction' reserved no slot for the
    # correction below, and the gate evicted it in silence.
    facts = [
        {"id": "a", "category": "context", "confidence": 0.9},
        {"id": "b", "category": "correction", "confidence": 0.2},
    ]
    with pytest.raises(ValueError, match=r"reserved_categories .* single string: got 'correction'"):
        select_facts_for_capacity(
            facts, max_facts=1, policy=POLICY_HYBRID_V1, reserved_categories="correction", now=NOW
        )
    kept = select_facts_for_capacity(
        facts, max_facts=1, policy=POLICY_HYBRID_V1, reserved_categories=["correction"], now=NOW
    )
    assert kept.kept_ids == ("b",)


def test_weights_within_the_tolerance_are_accepted() -> None:
    policy = CapacityPolicy(
        confidence_weight=0.5, confirmation_weight=0.3, access_weight=0.2 + 5e-10
    )
    assert policy.access_weight == 0.2 + 5e-10
    with pytest.raises(ValueError, match=r"sum to 1\.0"):
        CapacityPolicy(confidence_weight=0.5, confirmation_weight=0.3, access_weight=0.2 + 2e-9)


def test_usage_matters_to_hybrid_and_to_shadow_mode_only() -> None:
    assert not CapacityPolicy().uses_usage
    assert CapacityPolicy(name=POLICY_HYBRID_V1).uses_usage
    assert CapacityPolicy(shadow_enabled=True).uses_usage
    assert CapacityPolicy().shadow_policy is None
    assert CapacityPolicy(shadow_enabled=True).shadow_policy == POLICY_HYBRID_V1


def test_the_two_policies_shadow_each_other() -> None:
    """A new store runs hybrid-v1 with confidence in its shadow (issue 24, point 1)."""
    assert CapacityPolicy(name=POLICY_HYBRID_V1, shadow_enabled=True).shadow_policy == (
        POLICY_CONFIDENCE
    )
    assert CapacityPolicy(name=POLICY_HYBRID_V1).shadow_policy is None
