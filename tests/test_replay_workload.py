"""The replay's pure parts: parameters, the seeded workload and its ground truth, the bootstrap."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem.eval.errors import ProtocolError
from deermem.eval.protocol import parse_yaml
from deermem.eval.replay import (
    BURST_CATEGORY,
    START,
    ReplayParams,
    _as_tuples,
    generate,
    load_params,
    paired_interval,
)


@pytest.fixture(scope="module")
def params() -> ReplayParams:
    return load_params().params.quickened()


def bundled() -> dict[str, object]:
    raw = yaml.safe_load(
        (Path(__file__).parents[1] / "src/deermem/eval/replay-params.yaml").read_text()
    )
    assert isinstance(raw, dict)
    return raw


# --- parameters -------------------------------------------------------------------


def test_the_bundled_parameters_load_and_say_where_they_came_from() -> None:
    loaded = load_params()
    assert loaded.source == "bundled"
    assert len(loaded.sha256) == 64
    assert loaded.params.caps == (25, 50, 100)
    assert loaded.params.model_dump(mode="json")["caps"] == [25, 50, 100]
    quick = loaded.params.quickened()
    assert (quick.seeds, quick.users, quick.days) == (3, 1, 60)
    assert quick.caps == loaded.params.caps


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"seeds": 0}, "seeds"),  # at least one workload
        ({"facts_per_session": [3, 1]}, "facts_per_session"),  # a range is [low, high]
        ({"caps": [25, 25]}, None),  # each cap once
        ({"cap": [25]}, "cap"),  # an unknown key is a typo, not ignored
        ({"signals": {"search_on_need": 2}}, "signals.search_on_need"),  # a chance is in [0, 1]
        ({"version": 2}, "version"),
    ],
)
def test_a_bad_parameters_file_names_the_key(
    tmp_path: Path, change: dict[str, object], key: str | None
) -> None:
    raw = {**bundled(), **change}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw), "utf-8")
    with pytest.raises(ProtocolError) as refused:
        load_params(path)
    assert refused.value.file == str(path)
    if key is not None:
        assert refused.value.key is not None
        assert refused.value.key.startswith(key)


@pytest.mark.parametrize(
    ("change", "key", "got"),
    [
        ({"seeds": True}, "seeds", "True"),  # YAML's `yes`: no count
        ({"caps": ["25"]}, "caps.0", "'25'"),  # a quoted number is text
        ({"users": 1.0}, "users", "1.0"),  # no whole number, though it equals one
        ({"quick": {"seeds": True, "users": 1, "days": 60}}, "quick.seeds", "True"),
        ({"search_top_k": "5"}, "search_top_k", "'5'"),
        ({"signals": [1, 2]}, "signals", "a list"),  # a section is named by its kind
    ],
)
def test_a_value_of_the_wrong_type_is_refused_not_coerced(
    tmp_path: Path, change: dict[str, object], key: str, got: str
) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({**bundled(), **change}), "utf-8")
    with pytest.raises(ProtocolError) as refused:
        load_params(path)
    assert (refused.value.file, refused.value.key) == (str(path), key)
    assert str(refused.value).endswith(f"(got {got})")


def test_a_missing_key_is_named_without_quoting_the_file(tmp_path: Path) -> None:
    raw = bundled()
    del raw["search_top_k"]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw), "utf-8")
    with pytest.raises(ProtocolError) as refused:
        load_params(path)
    assert (refused.value.file, refused.value.key) == (str(path), "search_top_k")
    assert str(refused.value) == f"{path}: search_top_k: Field required"


def test_shares_must_sum_to_one(tmp_path: Path) -> None:
    raw = bundled()
    categories = raw["categories"]
    assert isinstance(categories, dict)
    categories["preference"]["share"] = 0.5
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw), "utf-8")
    with pytest.raises(ProtocolError, match="sum to 1"):
        load_params(path)


@pytest.mark.parametrize("content", ["[not, a, mapping]", "seeds: [", ""])
def test_a_file_that_is_not_a_mapping_is_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(content, "utf-8")
    with pytest.raises(ProtocolError, match=r"params\.yaml"):
        load_params(path)
    with pytest.raises(ProtocolError, match="cannot be read"):
        load_params(tmp_path / "missing.yaml")


def test_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    """The evaluation's one YAML reader: the last of two values is not quietly taken."""
    path = tmp_path / "params.yaml"
    text = yaml.safe_dump(bundled(), sort_keys=False)
    path.write_text(text.replace("seeds: 20\n", "seeds: 20\nseeds: 2\n", 1), "utf-8")
    with pytest.raises(ProtocolError, match="is given twice") as refused:
        load_params(path)
    assert (refused.value.file, refused.value.key) == (str(path), "seeds")


def test_a_list_that_contains_itself_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(bundled()) + "loop: &loop [1, *loop]\n", "utf-8")
    with pytest.raises(ProtocolError, match="contains itself") as refused:
        load_params(path)
    assert (refused.value.file, refused.value.key) == (str(path), None)


def test_aliases_are_converted_once_however_deeply_they_nest(tmp_path: Path) -> None:
    """Nine aliases of nine aliases ... expand to 9**n lists: converted once per anchor and
    shared, a file costs what its text does (a copy per reference: 9**12 lists for 12 lines)."""
    levels = ["a0: &a0 [1, 2]"]
    levels += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 6)]
    document = parse_yaml("params.yaml", "\n".join(levels).encode())
    converted = _as_tuples(document)
    assert isinstance(converted, dict)
    top = converted["a5"]
    assert isinstance(top, tuple)
    assert all(item is top[0] for item in top)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(bundled()) + "\n".join(levels) + "\n", "utf-8")
    with pytest.raises(ProtocolError, match="Extra inputs are not permitted") as refused:
        load_params(path)
    assert refused.value.key == "a0"


# --- the workload -----------------------------------------------------------------


def test_a_seed_gives_the_same_workload_every_time(params: ReplayParams) -> None:
    assert generate(params, 4) == generate(params, 4)
    assert generate(params, 4) != generate(params, 5)


def test_the_ground_truth_is_consistent(params: ReplayParams) -> None:
    workload = generate(params, 1)
    stated_at = {}
    for session in workload.sessions:
        assert START <= session.at < START + timedelta(days=params.days)
        for key in session.stated:
            assert key not in stated_at  # stated once for the first time
            stated_at[key] = session.at
        for key in (*session.needed, *session.restated, *session.confirmations):
            assert stated_at[key] < session.at  # only what was said before
        for search in session.searches:
            assert set(search.query.split()) <= set(workload.facts[search.target].words)
            assert search.needed == (search.target in session.needed)
        for correction in session.corrections:
            assert correction.new in session.stated
            assert (
                workload.facts[correction.new].category == workload.facts[correction.old].category
            )
    assert set(stated_at) == set(workload.facts)
    for fact in workload.facts.values():
        assert all(stated_at[fact.key] < need for need in fact.needs)
        if fact.burst:
            assert (fact.category, fact.needs) == (BURST_CATEGORY, ())
    assert [s.at for s in workload.sessions] == sorted(s.at for s in workload.sessions)


def test_noise_targets_only_facts_never_needed(params: ReplayParams) -> None:
    workload = generate(params.model_copy(update={"days": 180, "users": 2}), 2)
    for session in workload.sessions:
        for search in session.searches:
            if not search.needed:
                assert workload.facts[search.target].needs == ()
        for key in session.confirmations:
            assert key in session.needed or workload.facts[key].needs == ()


def test_every_need_is_a_need_of_a_session(params: ReplayParams) -> None:
    workload = generate(params.model_copy(update={"days": 365}), 3)
    needed = [key for session in workload.sessions for key in session.needed]
    assert len(needed) == len(set(needed)) or len(needed) > len(set(needed))
    assert workload.needs == len(needed)
    planned = {key for key, fact in workload.facts.items() if fact.needs}
    assert set(needed) <= planned


def test_the_content_is_made_of_invented_words_only(params: ReplayParams) -> None:
    workload = generate(params, 0)
    words = [w for fact in workload.facts.values() for w in fact.words]
    assert len(words) == len(set(words))  # each word names one fact
    for fact in workload.facts.values():
        assert fact.content == f"The user's {fact.category}: {' '.join(fact.words)}"


# --- the bootstrap ----------------------------------------------------------------


def test_the_interval_holds_the_mean_and_is_seeded() -> None:
    first = [0.5, 0.6, 0.55, 0.7, 0.4]
    second = [0.6, 0.65, 0.6, 0.8, 0.45]
    interval = paired_interval(first, second, iterations=2000, confidence=0.95, seed=1)
    assert interval.low <= interval.mean <= interval.high
    assert interval.mean == pytest.approx(0.07)
    assert interval.excludes_zero
    again = paired_interval(first, second, iterations=2000, confidence=0.95, seed=1)
    assert again == interval


def test_a_constant_difference_has_a_point_interval() -> None:
    interval = paired_interval([0.1, 0.2], [0.3, 0.4], iterations=500, confidence=0.9, seed=3)
    assert (interval.low, interval.high) == pytest.approx((0.2, 0.2))


def test_unpaired_values_are_refused() -> None:
    with pytest.raises(ValueError, match="paired"):
        paired_interval([0.1], [0.1, 0.2], iterations=100, confidence=0.9, seed=1)
    with pytest.raises(ValueError, match="paired"):
        paired_interval([], [], iterations=100, confidence=0.9, seed=1)


@given(
    st.lists(
        st.tuples(st.floats(0, 1, allow_nan=False), st.floats(0, 1, allow_nan=False)),
        min_size=1,
        max_size=30,
    )
)
@settings(max_examples=60, deadline=None)
def test_the_interval_lies_within_the_differences(pairs: list[tuple[float, float]]) -> None:
    first = [a for a, _ in pairs]
    second = [b for _, b in pairs]
    interval = paired_interval(first, second, iterations=200, confidence=0.95, seed=7)
    differences = [b - a for a, b in pairs]
    assert min(differences) - 1e-12 <= interval.low <= interval.high <= max(differences) + 1e-12
