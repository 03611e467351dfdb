"""Budgeted injection: the guarantee, the greedy stop rule, truncation, the manifest."""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem.config import MemoryConfig
from deermem.model import Fact, format_timestamp
from deermem.policy import POLICY_HYBRID_V1, CapacityPolicy, select_facts_for_capacity
from deermem.recall import InjectionManifest
from deermem.recall.injection import InjectionSettings, Summaries, build_injection
from deermem.recall.tokens import count_tokens, token_counter
from deermem.results import to_json

NOW = datetime(2026, 11, 30, tzinfo=UTC)
COUNT = token_counter("tiktoken")


def cost(line: str) -> int:
    return COUNT(line + "\n")


def fact(
    fact_id: str,
    content: str,
    category: str = "preference",
    confidence: float = 0.9,
    **extra: object,
) -> Fact:
    data: dict[str, object] = {
        "id": fact_id,
        "content": content,
        "category": category,
        "confidence": confidence,
        "createdAt": "2026-11-01T00:00:00Z",
    }
    data.update(extra)
    return Fact.from_dict(data)


def budget(max_tokens: int, guaranteed: int = 500, **kwargs: object) -> InjectionSettings:
    return InjectionSettings(max_tokens=max_tokens, guaranteed_token_budget=guaranteed, **kwargs)  # type: ignore[arg-type]


def seed_library() -> list[Fact]:
    """The seed's situation: ten confident preferences and one 0.7 correction."""
    preferences = [
        fact(
            f"pref_{n:02d}",
            f"User prefers option {n} of the deployment tooling for a long list of reasons",
            confidence=0.9,
        )
        for n in range(10)
    ]
    correction = fact(
        "corr_uv", "Do not use pip; use uv for every install", "correction", 0.7,
        sourceError="ran pip install",
    )  # fmt: skip
    return [*preferences, correction]


# --- the guarantee ------------------------------------------------------------------------


def test_seed_correction_is_injected_under_a_tight_budget() -> None:
    facts = seed_library()
    injection = build_injection(facts, settings=budget(100, 50), now=NOW)
    manifest = injection.manifest
    assert "corr_uv" in manifest.injected_ids
    first = manifest.injected[0]
    assert (first.fact_id, first.pool) == ("corr_uv", "guaranteed")
    assert injection.text.split("\n")[1].startswith("- [correction | 0.70] Do not use pip")
    assert "(avoid: ran pip install)" in injection.text
    # the ten preferences compete for the rest, and most do not fit
    assert sum(item.reason == "over-budget" for item in manifest.omitted) == 1
    assert manifest.omitted[0].category == "preference"


def test_without_the_guarantee_the_seed_correction_is_lost() -> None:
    """The control: one confidence-ranked pool drops the correction (the seed's bug)."""
    facts = seed_library()
    injection = build_injection(facts, settings=budget(100, 50, guaranteed_categories=()), now=NOW)
    assert "corr_uv" not in injection.manifest.injected_ids
    assert "corr_uv" in injection.manifest.omitted_ids


@settings(max_examples=120, deadline=None)
@given(
    max_tokens=st.integers(100, 8000),
    guaranteed=st.integers(50, 2000),
    words=st.lists(st.integers(1, 60), min_size=10, max_size=10),
    policy=st.sampled_from(["confidence", "hybrid-v1"]),
    summary_words=st.integers(0, 3000),
)
def test_correction_always_injected_when_its_line_fits_the_guaranteed_budget(
    max_tokens: int, guaranteed: int, words: list[int], policy: str, summary_words: int
) -> None:
    facts = [
        fact(f"pref_{n}", " ".join(["preference"] * count), confidence=0.9)
        for n, count in enumerate(words)
    ]
    correction = fact("corr", "Use uv, never pip", "correction", 0.7)
    facts.append(correction)
    settings_ = budget(max_tokens, guaranteed, ranking=CapacityPolicy(name=policy))
    injection = build_injection(
        facts, settings=settings_, now=NOW, summaries=Summaries(work="busy " * summary_words)
    )
    line = "- [correction | 0.70] Use uv, never pip"
    assert cost(line) <= guaranteed
    assert "corr" in injection.manifest.injected_ids
    assert line in injection.text.split("\n")


def test_guaranteed_facts_are_ordered_by_rank() -> None:
    facts = [
        fact("c1", "first correction", "correction", 0.6),
        fact("c2", "second correction", "correction", 0.95),
        fact("c3", "third correction", "correction", 0.8),
    ]
    manifest = build_injection(facts, settings=budget(2000), now=NOW).manifest
    assert manifest.injected_ids == ("c2", "c3", "c1")
    assert {item.pool for item in manifest.injected} == {"guaranteed"}


def test_guaranteed_pool_is_cut_at_its_own_budget_and_the_rest_spills_over() -> None:
    facts = [fact(f"c{n}", f"correction number {n}", "correction", 0.9 - n / 100) for n in range(3)]
    facts.append(fact("p", "a plain preference", "preference", 0.5))
    line_cost = cost("- [correction | 0.90] correction number 0")
    injection = build_injection(facts, settings=budget(2000, line_cost * 2), now=NOW)
    pools = {item.fact_id: item.pool for item in injection.manifest.injected}
    # two fit the guaranteed budget; the third competes on its rank, ahead of the preference
    assert pools == {"c0": "guaranteed", "c1": "guaranteed", "c2": "ranked", "p": "ranked"}
    assert injection.manifest.injected_ids == ("c0", "c1", "c2", "p")
    assert injection.manifest.guaranteed_tokens <= line_cost * 2


def test_both_pools_fit_through_their_own_budgets() -> None:
    correction = fact("c", "use uv", "correction", 0.7)
    preference = fact("p", "likes green tea in the morning", "preference", 0.9)
    line_c = cost("- [correction | 0.70] use uv")
    line_p = cost("- [preference | 0.90] likes green tea in the morning")
    max_tokens = cost("Facts:") + line_c + line_p
    manifest = build_injection(
        [preference, correction], settings=budget(max_tokens, line_c), now=NOW
    ).manifest
    assert manifest.injected_ids == ("c", "p")
    assert [item.pool for item in manifest.injected] == ["guaranteed", "ranked"]


@settings(max_examples=120, deadline=None)
@given(
    max_tokens=st.integers(100, 3000),
    guaranteed=st.integers(50, 2000),
    corrections=st.integers(0, 40),
    preferences=st.integers(0, 40),
    summary_words=st.integers(0, 200),
)
def test_guaranteed_budget_never_starves_the_rest_beyond_its_size(
    max_tokens: int, guaranteed: int, corrections: int, preferences: int, summary_words: int
) -> None:
    rng = random.Random(corrections * 1000 + preferences)
    facts = [
        fact(f"c{n}", "correction " * rng.randint(1, 30), "correction", rng.random())
        for n in range(corrections)
    ] + [
        fact(f"p{n}", "preference " * rng.randint(1, 30), "preference", rng.random())
        for n in range(preferences)
    ]
    summaries = Summaries(work="summary " * summary_words)
    injection = build_injection(
        facts, settings=budget(max_tokens, guaranteed), now=NOW, summaries=summaries
    )
    manifest = injection.manifest
    assert manifest.guaranteed_tokens <= guaranteed
    overhead = manifest.summary_tokens + cost("Facts:") + (cost("") if summary_words else 0)
    first_left_out = next((item for item in manifest.omitted if item.reason == "over-budget"), None)
    if first_left_out is not None and not manifest.summaries_truncated:
        # it was left out only because the ranked pool's room — max_tokens minus
        # summaries, header and the guaranteed lines (≤ their budget) — was used up
        room = max_tokens - overhead - manifest.guaranteed_tokens
        assert manifest.ranked_tokens + (first_left_out.tokens or 0) > room
        assert room >= max_tokens - overhead - guaranteed
    assert manifest.budget_tokens <= max_tokens + manifest.guaranteed_tokens
    assert injection.exact_tokens() <= manifest.budget_tokens


# --- the greedy stop rule, ordering, counting ---------------------------------------------


def test_facts_sorted_by_confidence_and_budget_drops_the_rest() -> None:
    low = fact("low", "lower confidence fact", confidence=0.4)
    high = fact("high", "higher confidence fact", confidence=0.8)
    both = build_injection([low, high], settings=budget(2000), now=NOW)
    assert both.manifest.injected_ids == ("high", "low")
    one = cost("Facts:") + cost("- [preference | 0.80] higher confidence fact")
    tight = build_injection([low, high], settings=budget(one, 50), now=NOW)
    assert tight.manifest.injected_ids == ("high",)
    assert [(o.fact_id, o.reason) for o in tight.manifest.omitted] == [("low", "over-budget")]


def test_selection_stops_at_the_first_line_that_does_not_fit() -> None:
    small = fact("a_small", "short", confidence=0.9)
    long = fact("b_long", "a much longer line " * 20, confidence=0.8)
    tiny = fact("c_tiny", "tiny", confidence=0.1)
    room = cost("Facts:") + cost("- [preference | 0.90] short") + cost("- [preference | 0.10] tiny")
    manifest = build_injection([tiny, long, small], settings=budget(room, 50), now=NOW).manifest
    assert manifest.injected_ids == ("a_small",)  # "tiny" would fit, but never jumps the queue
    assert [(o.fact_id, o.reason) for o in manifest.omitted] == [
        ("b_long", "over-budget"),
        ("c_tiny", "after-stop"),
    ]


def test_single_facts_header_with_both_pools() -> None:
    text = build_injection(seed_library(), settings=budget(2000), now=NOW).text
    assert text.split("\n").count("Facts:") == 1


def test_invalid_content_is_skipped_and_listed() -> None:
    facts: list[dict[str, object]] = [
        {"id": "none", "content": None, "confidence": 0.9},
        {"id": "int", "content": 42, "confidence": 0.9},
        {"id": "list", "content": ["a"], "confidence": 0.9},
        {"id": "blank", "content": " \n ", "confidence": 0.9},
        {"content": "no id at all", "confidence": 0.1},
        {"id": "ok", "content": "valid", "confidence": 0.5},
    ]
    injection = build_injection(facts, settings=budget(2000), now=NOW)
    assert injection.text == "Facts:\n- [context | 0.50] valid\n- [context | 0.10] no id at all"
    assert injection.manifest.injected_ids == ("ok", "")
    invalid = [o.fact_id for o in injection.manifest.omitted if o.reason == "invalid-content"]
    assert invalid == ["blank", "int", "list", "none"]  # by id, as the docstring promises
    assert "42" not in injection.text


def test_invalid_content_omissions_do_not_depend_on_the_input_order() -> None:
    facts: list[dict[str, object]] = [
        {"id": "f1", "category": "context", "confidence": 0.5, "content": "\n"},
        {"id": "f2", "category": "context", "confidence": 0.5, "content": "   "},
        {"id": "f3", "category": "context", "confidence": 0.5, "content": "Real fact."},
    ]
    forward = build_injection(facts, settings=budget(2000), now=NOW)
    backward = build_injection(facts[::-1], settings=budget(2000), now=NOW)
    assert forward.manifest == backward.manifest
    assert forward.manifest.omitted_ids == ("f1", "f2")


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (1.5, "1.00"),  # clamped
        (-0.5, "0.00"),
        (0.75, "0.75"),
        (math.nan, "0.50"),  # unreadable: the policy's default, 0.5
        (math.inf, "0.50"),
        (None, "0.50"),
        ("0.3", "0.30"),
    ],
)
def test_confidence_is_read_as_the_policy_reads_it(raw: object, shown: str) -> None:
    text = build_injection(
        [{"id": "a", "content": "x", "category": "goal", "confidence": raw}],
        settings=budget(2000),
        now=NOW,
    ).text
    assert text == f"Facts:\n- [goal | {shown}] x"


def test_categoryless_fact_never_joins_a_protected_pool() -> None:
    facts: list[dict[str, object]] = [
        {"id": "bare", "content": "no category", "confidence": 0.9},
        {"id": "ctx", "content": "explicit context", "category": " Context ", "confidence": 0.1},
    ]
    settings_ = budget(2000, guaranteed_categories=("context",))
    manifest = build_injection(facts, settings=settings_, now=NOW).manifest
    pools = {item.fact_id: item.pool for item in manifest.injected}
    assert pools == {"ctx": "guaranteed", "bare": "ranked"}


def test_empty_guaranteed_list_is_one_confidence_pool() -> None:
    facts = seed_library()
    manifest = build_injection(
        facts, settings=budget(2000, guaranteed_categories=()), now=NOW
    ).manifest
    assert {item.pool for item in manifest.injected} == {"ranked"}
    assert manifest.injected_ids[-1] == "corr_uv"  # 0.7 ranks after the 0.9s


def test_a_bare_string_of_categories_is_refused() -> None:
    with pytest.raises(TypeError, match="one string"):
        InjectionSettings(guaranteed_categories="correction")  # type: ignore[arg-type]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        InjectionSettings(max_tokens=-1)
    with pytest.raises(ValueError, match="token_counting"):
        InjectionSettings(token_counting="bpe")


# --- hybrid-v1 ordering -------------------------------------------------------------------


def hybrid_library() -> tuple[list[Fact], dict[str, dict[str, object]]]:
    old = format_timestamp(NOW - timedelta(days=400))
    recent = format_timestamp(NOW - timedelta(days=2))
    facts = [
        fact("stale_confident", "confident but never confirmed", confidence=0.9, createdAt=old),
        fact("confirmed", "confirmed last week", confidence=0.7, createdAt=old,
             lastConfirmedAt=recent),
        fact("recalled", "recalled often", confidence=0.75, createdAt=old),
        fact("fresh", "created two days ago", confidence=0.8, createdAt=recent),
    ]  # fmt: skip
    usage: dict[str, dict[str, object]] = {
        "recalled": {"accessHeat": 8.0, "accessCount": 12, "lastAccessedAt": recent}
    }
    return facts, usage


def test_hybrid_orders_by_the_policy_score() -> None:
    facts, usage = hybrid_library()
    policy = CapacityPolicy(name=POLICY_HYBRID_V1)
    manifest = build_injection(
        facts, settings=budget(2000, ranking=policy), now=NOW, usage=usage
    ).manifest
    reference = select_facts_for_capacity(
        facts, max_facts=0, policy=POLICY_HYBRID_V1, usage=usage, now=NOW
    )
    expected = sorted(facts, key=lambda f: (-reference.scores[f.id].score, f.id))
    assert manifest.injected_ids == tuple(f.id for f in expected)
    for item in manifest.injected:
        assert item.score == reference.scores[item.fact_id].score
    assert manifest.injected_ids != ("stale_confident", "fresh", "recalled", "confirmed")
    assert manifest.policy == "hybrid-v1"


def test_confidence_orders_by_confidence() -> None:
    facts, usage = hybrid_library()
    manifest = build_injection(facts, settings=budget(2000), now=NOW, usage=usage).manifest
    assert manifest.injected_ids == ("stale_confident", "fresh", "recalled", "confirmed")
    assert [item.score for item in manifest.injected] == [0.9, 0.8, 0.75, 0.7]


def test_usage_moves_a_fact_up_under_hybrid() -> None:
    facts, usage = hybrid_library()
    policy = CapacityPolicy(name=POLICY_HYBRID_V1)
    with_usage = build_injection(facts, settings=budget(2000, ranking=policy), now=NOW, usage=usage)
    without = build_injection(facts, settings=budget(2000, ranking=policy), now=NOW)
    rank = {i.fact_id: i.rank for i in with_usage.manifest.injected}
    rank_without = {i.fact_id: i.rank for i in without.manifest.injected}
    assert rank["recalled"] < rank_without["recalled"]


# --- truncation ---------------------------------------------------------------------------


def test_overflowing_summaries_are_cut_and_the_facts_kept() -> None:
    summaries = Summaries(work="very long work summary " * 400, background="background " * 300)
    facts = seed_library()
    injection = build_injection(facts, settings=budget(300, 100), now=NOW, summaries=summaries)
    manifest = injection.manifest
    assert manifest.summaries_truncated
    lines = injection.text.split("\n")
    assert lines[0] == "User Context:"
    facts_at = lines.index("Facts:")
    assert lines[facts_at - 2] == "..."
    assert lines[facts_at - 1] == ""
    assert lines[facts_at + 1].startswith("- [correction | 0.70]")
    assert "corr_uv" in manifest.injected_ids
    assert manifest.budget_tokens <= 300 + manifest.guaranteed_tokens
    assert injection.exact_tokens() <= manifest.budget_tokens


def test_overflow_without_facts_is_cut_safely() -> None:
    summaries = Summaries(work="&<>" * 2000)
    injection = build_injection([], settings=budget(100), now=NOW, summaries=summaries)
    assert injection.manifest.summaries_truncated
    assert injection.text.endswith("\n...")
    assert injection.manifest.budget_tokens <= 100
    assert "&am\n" not in injection.text
    assert not injection.text.split("\n")[-2].endswith("&")


# Characters of more than one code point: an accent, a virama and its conjunct, a ZWJ
# family, a skin tone, a flag, a variation selector, a keycap.
CLUSTERS = [
    "e\u0301",
    "\u0938\u094d\u0924\u0947",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\U0001f44d\U0001f3fd",
    "\U0001f1e9\U0001f1ea",
    "\u263a\ufe0f",
    "1\ufe0f\u20e3",
]


@settings(max_examples=200, deadline=None)
@given(
    characters=st.lists(st.sampled_from([*CLUSTERS, "a", " ", "机"]), min_size=1, max_size=300),
    max_tokens=st.integers(10, 200),
    counting=st.sampled_from(["tiktoken", "char"]),
)
def test_summaries_are_cut_between_characters(
    characters: list[str], max_tokens: int, counting: str
) -> None:
    """A cut never takes an accent off its letter, a virama off its conjunct, a skin tone or
    the rest of a ZWJ sequence off its emoji, or half a flag: what stays is whole characters."""
    characters = ["a", *characters]  # inert() strips a leading blank
    work = "".join(characters)
    settings_ = budget(max_tokens, token_counting=counting, strict_budget=True)
    injection = build_injection([], settings=settings_, now=NOW, summaries=Summaries(work=work))
    lines = injection.text.split("\n")
    if not injection.manifest.summaries_truncated or not lines[1].startswith("- Work: "):
        return  # not cut, or cut before the summary's text
    head = lines[1].removeprefix("- Work: ")
    assert work.startswith(head)
    assert len(head) in {len("".join(characters[:n])) for n in range(len(characters) + 1)}


@settings(max_examples=150, deadline=None)
@given(
    max_tokens=st.integers(0, 400),
    guaranteed=st.integers(0, 600),
    data=st.lists(
        st.tuples(
            st.sampled_from(["preference", "correction", "goal"]),
            st.floats(0, 1),
            st.text(min_size=1, max_size=120),
        ),
        max_size=30,
    ),
    work=st.text(max_size=600),
    recent=st.text(max_size=300),
    counting=st.sampled_from(["tiktoken", "char"]),
)
def test_a_strict_budget_bounds_the_whole_text(
    max_tokens: int,
    guaranteed: int,
    data: list[tuple[str, float, str]],
    work: str,
    recent: str,
    counting: str,
) -> None:
    """A caller's max_tokens (strict_budget) holds for any facts, summaries and budget: the
    block as the counter counts it — its <memory> lines, guaranteed lines, header and
    summaries together."""
    facts = [
        fact(f"f{n:02d}", f"x{content}", category, round(confidence, 2))
        for n, (category, confidence, content) in enumerate(data)
    ]
    settings_ = budget(max_tokens, guaranteed, token_counting=counting, strict_budget=True)
    summaries = Summaries(work=work, recent=recent)
    injection = build_injection(facts, settings=settings_, now=NOW, summaries=summaries)
    assert injection.exact_tokens() <= injection.manifest.budget_tokens <= max_tokens
    assert injection.counter(injection.block) <= max_tokens
    assert injection.manifest.guaranteed_tokens <= injection.manifest.guaranteed_token_budget


def test_summaries_keep_the_overall_budget_minus_the_facts_header() -> None:
    """Guaranteed lines may exceed max_tokens by their own size; summaries may not."""
    summaries = Summaries(work="word " * 1000)
    facts = [fact("c", "x " * 40, "correction", 0.9)]
    injection = build_injection(facts, settings=budget(100, 500), now=NOW, summaries=summaries)
    manifest = injection.manifest
    assert manifest.summaries_truncated
    assert manifest.injected_ids == ("c",)
    assert manifest.summary_tokens <= 100 - cost("Facts:") - cost("")
    assert manifest.budget_tokens <= 100 + manifest.guaranteed_tokens


# --- determinism, the manifest, configuration ---------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(
        st.tuples(
            st.sampled_from(["preference", "correction", "goal", "context"]),
            st.floats(0, 1),
            st.integers(1, 40),
            st.integers(0, 500),
        ),
        max_size=25,
    ),
    max_tokens=st.integers(100, 1500),
    guaranteed=st.integers(50, 600),
    policy=st.sampled_from(["confidence", "hybrid-v1"]),
    seed=st.integers(0, 2**16),
)
def test_injection_is_deterministic_and_order_independent(
    data: list[tuple[str, float, int, int]],
    max_tokens: int,
    guaranteed: int,
    policy: str,
    seed: int,
) -> None:
    facts = [
        fact(
            f"f{n:03d}",
            "word " * words,
            category,
            round(confidence, 3),
            createdAt=format_timestamp(NOW - timedelta(days=age)),
        )
        for n, (category, confidence, words, age) in enumerate(data)
    ]
    settings_ = budget(max_tokens, guaranteed, ranking=CapacityPolicy(name=policy))
    first = build_injection(facts, settings=settings_, now=NOW)
    shuffled = list(facts)
    random.Random(seed).shuffle(shuffled)
    second = build_injection(shuffled, settings=settings_, now=NOW)
    assert first == second
    assert json.dumps(to_json(first.manifest, InjectionManifest), sort_keys=True) == json.dumps(
        to_json(second.manifest, InjectionManifest), sort_keys=True
    )
    assert len(first.manifest.injected) + len(first.manifest.omitted) == len(facts)


def test_manifest_carries_no_content() -> None:
    secret = "the user's bank PIN is 4321"
    facts = [fact("a", secret), fact("b", "x " * 3000, "correction", sourceError="oops secret")]
    injection = build_injection(
        facts, settings=budget(200, 50), now=NOW, summaries=Summaries(work=secret)
    )
    dumped = json.dumps(to_json(injection.manifest, InjectionManifest))
    assert "PIN" not in dumped
    assert "oops" not in dumped
    assert "x x" not in dumped
    assert json.loads(dumped)["omitted"][0]["factId"] in {"a", "b"}


def test_manifest_reports_counts_and_methods() -> None:
    summaries = Summaries(work="w", recent="r")
    injection = build_injection(seed_library(), settings=budget(2000), now=NOW, summaries=summaries)
    manifest = injection.manifest
    assert manifest.sections == ("User Context", "History", "Facts")
    assert manifest.token_counter == manifest.token_counting == "tiktoken"
    assert injection.exact_tokens() == COUNT(injection.text) <= manifest.budget_tokens
    assert manifest.budget_tokens == sum(cost(line) for line in injection.text.split("\n"))
    assert sum(i.tokens for i in manifest.injected) == (
        manifest.guaranteed_tokens + manifest.ranked_tokens
    )
    as_dict = to_json(manifest, InjectionManifest)
    assert set(as_dict) >= {"injected", "omitted", "budgetTokens", "tokenCounter", "policy"}


def test_char_counting_is_reported() -> None:
    settings_ = budget(2000, token_counting="char")
    manifest = build_injection(seed_library(), settings=settings_, now=NOW).manifest
    assert manifest.token_counter == "char"
    line = "- [correction | 0.70] Do not use pip; use uv for every install (avoid: ran pip install)"
    assert manifest.injected[0].tokens == math.ceil((len(line) + 1) / 4)  # rounded up


@settings(max_examples=120, deadline=None)
@given(
    # The range a configuration allows (max_injection_tokens >= 100). Below it the `Facts:`
    # header a guaranteed line needs may not fit either, and goes over the budget with it.
    max_tokens=st.integers(100, 1500),
    guaranteed=st.integers(0, 600),
    data=st.lists(
        st.tuples(
            st.sampled_from(["preference", "correction"]),
            st.floats(0, 1),
            st.text(st.sampled_from("ab 机器한"), min_size=1, max_size=60),
        ),
        max_size=40,
    ),
    summary=st.text(st.sampled_from("ab 机器한\n"), max_size=400),
)
def test_char_counted_text_stays_within_the_budget(
    max_tokens: int,
    guaranteed: int,
    data: list[tuple[str, float, str]],
    summary: str,
) -> None:
    """The budget counts line by line; the whole text, estimated at once, never counts more."""
    facts = [
        fact(f"f{n:02d}", f"x{content}", category, round(confidence, 2))
        for n, (category, confidence, content) in enumerate(data)
    ]
    settings_ = budget(max_tokens, guaranteed, token_counting="char")
    injection = build_injection(facts, settings=settings_, now=NOW, summaries=Summaries(summary))
    manifest = injection.manifest
    assert injection.exact_tokens() == count_tokens(injection.text, "char")
    assert injection.exact_tokens() <= manifest.budget_tokens
    assert manifest.budget_tokens <= max_tokens + manifest.guaranteed_tokens


def test_char_counting_of_many_short_lines_keeps_the_budget() -> None:
    # 30-character lines: 7.75 estimated tokens each, 7 when rounded down line by line
    facts = [fact(f"p{n:02d}", f"abc{n:02d}xyz") for n in range(40)]
    injection = build_injection(facts, settings=budget(100, token_counting="char"), now=NOW)
    assert count_tokens(injection.text, "char") <= 100
    assert injection.exact_tokens() <= injection.manifest.budget_tokens <= 100


def test_disabled_injection_is_empty() -> None:
    injection = build_injection(seed_library(), settings=budget(2000, enabled=False), now=NOW)
    assert injection.text == ""
    assert injection.block == ""
    assert not injection.manifest.enabled
    assert injection.manifest.injected == ()


def test_settings_from_config() -> None:
    config = MemoryConfig(
        max_injection_tokens=300,
        guaranteed_token_budget=80,
        token_counting="char",
        injection_enabled=False,
        protected_categories=["correction", "Goal"],
        fact_eviction_policy="hybrid-v1",
    )
    settings_ = InjectionSettings.from_config(config)
    assert settings_.max_tokens == 300
    assert settings_.guaranteed_token_budget == 80
    assert settings_.token_counting == "char"
    assert not settings_.enabled
    assert settings_.guaranteed_categories == ("correction", "goal")
    assert settings_.ranking.name == "hybrid-v1"
    defaults = InjectionSettings.from_config(MemoryConfig())
    assert (defaults.max_tokens, defaults.guaranteed_token_budget) == (2000, 500)
    assert defaults.token_counting == "tiktoken"
    assert defaults.enabled


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_injection_tokens", 99),
        ("max_injection_tokens", 8001),
        ("guaranteed_token_budget", 49),
        ("guaranteed_token_budget", 2001),
        ("max_injection_tokens", True),
        ("token_counting", "bpe"),
    ],
)
def test_config_ranges(key: str, value: object) -> None:
    from deermem import ConfigError

    with pytest.raises(ConfigError, match=key):
        MemoryConfig(**{key: value})
