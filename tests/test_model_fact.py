"""The canonical fact: field rules, normalisation and the round trip."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deermem import FactValidationError, Memory, MemoryConfig
from deermem.model import (
    CORE_CATEGORIES,
    ID_ATTEMPTS,
    Fact,
    FactScope,
    FactSource,
    canonical_category,
    category_key,
    duplicate_digest,
    duplicate_key,
    format_timestamp,
    new_fact_id,
    parse_moment,
    parse_timestamp,
    random_fact_id,
)

NOW = datetime(2026, 8, 13, 12, 30, tzinfo=UTC)


def minimal(**changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "id": "fact_0a1b2c3d",
        "content": "The user prefers uv.",
        "createdAt": "2026-08-01T00:00:00Z",
    }
    data.update(changes)
    return data


def test_defaults_follow_the_canonical_schema() -> None:
    fact = Fact.from_dict(minimal())
    assert fact.category == "context"
    assert fact.confidence == 0.5
    assert fact.status == "active"
    assert fact.schemaVersion == 2
    assert fact.revision == 1
    assert fact.updatedAt == fact.createdAt
    assert fact.source == FactSource(type="unknown")
    assert fact.topics == ()


def test_created_at_defaults_to_the_injected_clock_else_is_unknown() -> None:
    """Never the wall clock: without one, stored data that has no (or a blank)
    creation time reads as unknown, as the policies and the review treat it."""
    data = minimal()
    del data["createdAt"]
    assert Fact.from_dict(data, now=NOW).createdAt == "2026-08-13T12:30:00Z"
    assert Fact.from_dict(minimal(createdAt=" "), now=NOW).createdAt == "2026-08-13T12:30:00Z"
    unknown = Fact.from_dict(data)
    assert (unknown.createdAt, unknown.updatedAt) == ("", "")
    assert parse_timestamp(unknown.createdAt) is None
    assert Fact.from_dict(unknown.to_dict()) == unknown


def test_content_is_stripped() -> None:
    assert Fact.from_dict(minimal(content="  use uv \n")).content == "use uv"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("id", "../escape"),  # path characters
        ("id", ""),  # empty
        ("id", "a" * 251),  # longer than a file name allows (``<id>.json``)
        ("id", 7),  # not a string
        ("content", "   "),  # blank
        ("content", None),  # missing
        ("confidence", 1.5),  # above range
        ("confidence", -0.1),  # below range
        ("confidence", True),  # bools are not numbers here
        ("confidence", "0.9"),  # strings are rejected at storage
        ("confidence", math.nan),  # not finite
        ("category", 9),  # not a string
        ("status", "archived"),  # only active facts are stored
        ("revision", 0),  # revisions start at 1
        ("revision", [1]),  # wrong type
        ("topics", "python"),  # a bare string is not a list
        ("consolidatedFrom", [1, 2]),  # not strings
        ("confirmationCount", 0),  # counts start at 1
        ("scope", {"userId": 5, "agentName": "a"}),  # wrong types
        ("lastConfirmedAt", 12),  # not a timestamp string
    ],
)
def test_invalid_fields_name_field_value_and_rule(field: str, value: object) -> None:
    with pytest.raises(FactValidationError) as caught:
        Fact.from_dict(minimal(**{field: value}))
    error = caught.value
    assert error.field == field
    assert error.value == value or (isinstance(value, float) and math.isnan(value))
    message = str(error)
    # Numbers, booleans and the text of ids, codes and times are quoted; any other text,
    # list or mapping is described by its size (it may be what a person wrote).
    if isinstance(value, str) and field in ("content", "topics", "confidence"):
        assert f"a text of {len(value)} characters" in message
    elif isinstance(value, list | dict):
        assert f"of {len(value)} " in message
        assert repr(value) not in message
    else:
        assert repr(value)[:20] in message
    assert "expected" in message or "allowed" in message


def test_an_error_never_quotes_what_a_fact_says() -> None:
    # Error messages reach logs, tool results and models (docs/privacy.md).
    secret = "my key ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5 "
    with pytest.raises(FactValidationError) as caught:
        Fact.from_dict(minimal(content=secret + "\udc80"))
    message = str(caught.value)
    assert "ghp_" not in message
    assert "field 'content' has a text of 49 characters" in message
    assert "byte 0x80 at position 48 is not UTF-8" in message
    assert caught.value.value == secret + "\udc80"  # the caller still has it
    with pytest.raises(FactValidationError) as caught:
        Fact.from_dict(minimal(topics=[secret, 5]))
    assert "ghp_" not in str(caught.value)


# A key of a long category, written split so no scanner takes this file for a leak.
_KEY = "sk" + "-proj-" + "Ab3dEf7hIjKlMn0pQrStUvWxYz12345678"


@given(
    text=st.text(min_size=1, max_size=200),
    field=st.sampled_from(
        [
            # A category is a label anyone may write (an ``other`` fact keeps it).
            "category",
            "value.category",  # the LangGraph store's value
            "facts[2].category",  # a user document's fact
            # A name deeper in a value, or a fact's unknown field, is a key of text
            # deermem does not know, even when it is named like a code field.
            "source.note.id",
            "extra[0].status",
            "role",
            "type",
            "userId",
            "agentName",
            # Text where a number belongs is whatever its writer typed.
            "confidence",
            "revision",
        ]
    ),
)
def test_an_error_describes_free_text_by_its_length(text: str, field: str) -> None:
    message = str(FactValidationError(field, text, "expected at most 64 characters"))
    assert f"field {field!r} has a text of {len(text):,} characters;" in message
    assert repr(text) not in message


@given(field=st.sampled_from(["id", "facts[3].id", "status", "threadId", "createdAt"]))
def test_an_error_quotes_ids_codes_and_times(field: str) -> None:
    message = str(FactValidationError(field, "not-a-thing", "expected something else"))
    assert f"field {field!r} has value 'not-a-thing';" in message


def test_a_category_too_long_is_refused_by_its_length(tmp_path: Path) -> None:
    # A long category holding a key: the refusal reaches logs, tool results and models.
    memory = Memory.open(tmp_path, user="gus")
    category = f"ci {_KEY} " + "y" * 40
    kept = memory.create_fact("Gus deploys on Fridays.").fact_id
    assert kept is not None
    for write in (
        lambda: memory.create_fact("Gus likes tea.", category=category),
        lambda: memory.update_fact(kept, category=category),
    ):
        with pytest.raises(FactValidationError) as caught:
            write()
        message = str(caught.value)
        assert "Ab3dEf7hIjKl" not in message
        assert f"field 'category' has a text of {len(category)} characters" in message


def test_errors_name_the_fact_when_its_id_is_known() -> None:
    with pytest.raises(FactValidationError, match="fact 'fact_0a1b2c3d'"):
        Fact.from_dict(minimal(confidence=2))


def test_unknown_category_becomes_other_with_extension() -> None:
    fact = Fact.from_dict(minimal(category="  knowledge "))
    assert (fact.category, fact.categoryExtension) == ("other", "knowledge")
    assert Fact.from_dict(fact.to_dict()) == fact


@pytest.mark.parametrize("category", CORE_CATEGORIES)
def test_core_categories_are_kept(category: str) -> None:
    fact = Fact.from_dict(minimal(category=category.upper()))
    assert (fact.category, fact.categoryExtension) == (category, None)


def test_blank_category_is_context() -> None:
    assert canonical_category("  ") == ("context", None)
    assert category_key(" Correction ") == "correction"
    assert category_key(None) == ""


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("manual", FactSource("manual")),
        ("import", FactSource("import")),
        ("thread-42", FactSource("conversation", "thread-42")),
        ({"type": "conversation", "threadId": "t1"}, FactSource("conversation", "t1")),
        (17, FactSource("unknown")),
        (None, FactSource("unknown")),
    ],
)
def test_source_normalisation(raw: object, expected: FactSource) -> None:
    assert FactSource.from_value(raw) == expected


def test_legacy_source_string() -> None:
    assert FactSource("conversation", "t1").legacy_string() == "t1"
    assert FactSource("manual").legacy_string() == "manual"


def test_unknown_keys_and_pass_through_fields_survive() -> None:
    data = minimal(
        futureField={"nested": [1, 2]},
        expected_valid_days=45,
        sourceError="suggested pip",
        lastConfirmedAt="2026-08-10T00:00:00Z",
        confirmationCount=2,
    )
    fact = Fact.from_dict(data)
    assert fact.extra == {"futureField": {"nested": [1, 2]}}
    out = fact.to_dict()
    for key in ("futureField", "expected_valid_days", "sourceError", "lastConfirmedAt"):
        assert out[key] == data[key]


def test_get_reads_a_fact_as_its_mapping_reads() -> None:
    fact = Fact.from_dict(
        minimal(category="Correction", confidence=0.8, lastConfirmedAt=NOW, futureField=3)
    )
    stored = fact.to_dict()
    for key in (
        "id",
        "content",
        "category",
        "confidence",
        "createdAt",
        "updatedAt",
        "lastConfirmedAt",
        "revision",
        "futureField",
    ):
        assert fact.get(key) == stored[key], key
    assert "consolidatedAt" not in stored
    assert fact.get("consolidatedAt") is None
    assert fact.get("title", "untitled") == "untitled"  # unset: the default, as a missing key
    assert fact.get("no_such_key") is None
    assert fact.get("extra") is None  # an attribute, not a stored key


def test_consolidated_at_defaults_to_updated_at() -> None:
    fact = Fact.from_dict(minimal(consolidatedFrom=["a", "b"], updatedAt="2026-08-02T00:00:00Z"))
    assert fact.consolidatedAt == "2026-08-02T00:00:00Z"


def test_heading_is_first_line_cut_to_160() -> None:
    fact = Fact.from_dict(minimal(content="x" * 200 + "\nsecond line"))
    assert fact.heading() == "x" * 160
    titled = Fact.from_dict(minimal(title="A\ntitle"))
    assert titled.heading() == "A title"


def test_replace_revalidates() -> None:
    fact = Fact.from_dict(minimal())
    assert fact.replace(confidence=0.9).confidence == 0.9
    with pytest.raises(FactValidationError):
        fact.replace(confidence=9)


def test_timestamps_parse_leniently() -> None:
    assert parse_timestamp("2026-08-13T00:00:00Z") == datetime(2026, 8, 13, tzinfo=UTC)
    assert parse_timestamp("2026-08-13T00:00:00") == datetime(2026, 8, 13, tzinfo=UTC)
    assert parse_timestamp("2026-08-13T02:00:00+02:00") == datetime(2026, 8, 13, tzinfo=UTC)
    bad: object
    for bad in ("yesterday", "", None, 12, True, []):
        assert parse_timestamp(bad) is None
    assert format_timestamp(datetime(2026, 1, 2, 3, 4, 5, 6)) == "2026-01-02T03:04:05.000006Z"


_offsets = st.integers(-1439, 1439).map(lambda minutes: timedelta(minutes=minutes))


@given(st.datetimes(timezones=st.builds(timezone, _offsets)))
def test_any_iso_8601_time_parses_or_is_unreadable_never_raises(moment: datetime) -> None:
    """``0001-01-01T00:00:00+01:00`` is valid ISO 8601, before year 1 in UTC: unreadable."""
    parsed = parse_timestamp(moment.isoformat())
    assert parsed is None or parsed == moment
    with pytest.raises(ValueError, match="between years 1 and 9999"):
        parse_moment("0001-01-01T00:00:00+01:00", NOW, option="--since")


def test_a_fact_dated_before_year_one_in_utc_is_kept_and_ranked_as_undated(tmp_path: Path) -> None:
    config = MemoryConfig(max_facts=10)
    memory = Memory.open(tmp_path, config, user="u", clock=lambda: NOW)
    edge = {"content": "odd clock", "createdAt": "0001-01-01T00:00:00+01:00"}
    memory.import_document({"facts": [*({"content": f"fact {n}"} for n in range(9)), edge]})
    reopened = Memory.open(tmp_path, config, user="u", clock=lambda: NOW)
    assert "odd clock" in {f.content for f in reopened.list_facts()}
    reopened.create_fact("one over the cap")  # the gate ranks them all
    assert len(reopened.list_facts()) == 10


ids = st.from_regex(r"[A-Za-z0-9_-]{1,40}", fullmatch=True)
texts = st.text(min_size=1).filter(lambda s: s.strip() != "")
stamps = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(format_timestamp)


@given(
    fact_id=ids,
    content=texts,
    category=st.one_of(st.sampled_from(CORE_CATEGORIES), st.text(max_size=20)),
    confidence=st.floats(min_value=0, max_value=1),
    created=stamps,
    confirmed=st.one_of(st.none(), stamps),
    count=st.one_of(st.none(), st.integers(min_value=1, max_value=10**6)),
    revision=st.integers(min_value=1, max_value=10**6),
    topics=st.lists(st.text(max_size=10), max_size=3),
    extra=st.dictionaries(
        st.text(min_size=1, max_size=8)
        .filter(lambda k: k not in {"id", "scope"})
        .map(lambda k: "x_" + k),
        st.one_of(st.integers(), st.text(max_size=5), st.none()),
        max_size=3,
    ),
)
def test_round_trip_is_identity(
    fact_id: str,
    content: str,
    category: str,
    confidence: float,
    created: str,
    confirmed: str | None,
    count: int | None,
    revision: int,
    topics: list[str],
    extra: dict[str, object],
) -> None:
    fact = Fact.from_dict(
        {
            "id": fact_id,
            "content": content,
            "category": category,
            "confidence": confidence,
            "createdAt": created,
            "lastConfirmedAt": confirmed,
            "confirmationCount": count,
            "revision": revision,
            "topics": topics,
            **extra,
        }
    )
    assert Fact.from_dict(fact.to_dict()) == fact


facts = st.fixed_dictionaries(
    {"id": ids, "content": texts, "createdAt": stamps},
    optional={
        "category": st.text(max_size=20),
        "categoryExtension": st.text(max_size=5),
        "title": st.text(max_size=20),
        "source": st.one_of(st.text(max_size=8), st.just({"type": "import", "x": [1]})),
        "scope": st.builds(FactScope, st.one_of(st.none(), st.text(max_size=5)), st.text()),
        "topics": st.lists(st.text(max_size=10), max_size=3),
        "consolidatedFrom": st.lists(ids, max_size=2),
        "lastConfirmedAt": st.one_of(st.none(), st.just(" "), stamps),
        "x_note": st.text(max_size=5),
    },
).map(lambda data: Fact.from_dict(dict(sorted(data.items(), key=lambda kv: hash(kv[0])))))


@given(fact=facts, user=st.one_of(st.none(), st.text(max_size=5)), agent=st.text(max_size=5))
def test_with_scope_is_replace_without_building_the_fact_again(
    fact: Fact, user: str | None, agent: str
) -> None:
    """What a store does to every fact it writes: the same fact, key order and all,
    as ``replace(scope=...)`` gives, without checking its fields again."""
    scope = FactScope(userId=user, agentName=agent)
    moved, rebuilt = fact.with_scope(scope), fact.replace(scope=scope)
    assert moved == rebuilt
    assert list(moved.to_dict().items()) == list(rebuilt.to_dict().items())
    # The keys it gains later go where they would have gone.
    gained = {"lastConfirmedAt": "2026-08-20T00:00:00Z", "title": "A title", "x_new": 1}
    assert list(moved.replace(**gained).to_dict()) == list(rebuilt.replace(**gained).to_dict())
    assert moved.with_scope(scope) is moved


def test_a_fact_keeps_the_order_of_its_keys_and_appends_what_it_gains() -> None:
    """As the original's dictionaries do: so both write a changed fact's file alike.
    What a file holds outside its front matter (scope, content, title) comes last, as a
    file gives it back: one order for a fact, whichever path made it."""
    fact = Fact.from_dict({"note": "first", **minimal(), "confidence": 0.7})
    keys = list(fact.to_dict())
    assert keys[:4] == ["note", "id", "createdAt", "confidence"]
    assert keys[4:] == [
        "schemaVersion", "category", "status", "topics", "consolidatedFrom", "source",
        "updatedAt", "revision", "content",
    ]  # fmt: skip
    confirmed = fact.replace(lastConfirmedAt="2026-08-20T00:00:00Z", confirmationCount=1)
    assert list(confirmed.to_dict())[-3:] == ["lastConfirmedAt", "confirmationCount", "content"]
    titled = confirmed.replace(title="A title").with_scope(FactScope("alice", "coder"))
    assert list(titled.to_dict())[-5:] == [
        "lastConfirmedAt", "confirmationCount", "scope", "content", "title",
    ]  # fmt: skip
    read_back = Fact.from_dict({"title": "A title", **titled.to_dict()})
    assert list(read_back.to_dict()) == list(titled.to_dict())
    assert list(Fact.from_dict(confirmed.to_dict()).to_dict()) == list(confirmed.to_dict())
    assert confirmed.replace(confirmationCount=2).to_dict()["confirmationCount"] == 2
    assert Fact.from_dict(dict(reversed(list(minimal().items())))) == Fact.from_dict(minimal())


def test_a_category_extension_beside_a_core_category_is_kept_and_not_used() -> None:
    fact = Fact.from_dict(minimal(category="preference", categoryExtension="drinks"))
    assert (fact.category, fact.categoryExtension) == ("preference", None)
    assert fact.get("categoryExtension") is None
    assert fact.to_dict()["categoryExtension"] == "drinks"
    other = fact.replace(category="other")  # it names the own label again
    assert (other.category, other.categoryExtension) == ("other", "drinks")
    assert Fact.from_dict(minimal(category="hobby", categoryExtension="x")).categoryExtension == "x"


def test_blank_timestamps_read_as_absent_and_are_kept_as_written() -> None:
    fact = Fact.from_dict(minimal(createdAt="", lastConfirmedAt=" ", updatedAt=""))
    assert (fact.createdAt, fact.updatedAt, fact.lastConfirmedAt) == ("", "", None)
    assert fact.get("lastConfirmedAt", "unset") == "unset"
    assert fact.to_dict()["lastConfirmedAt"] == " "
    assert Fact.from_dict(fact.to_dict()) == fact
    confirmed = fact.replace(lastConfirmedAt="2026-08-20T00:00:00Z")
    assert confirmed.to_dict()["lastConfirmedAt"] == "2026-08-20T00:00:00Z"


def test_a_source_keeps_its_other_keys_and_their_order() -> None:
    source = FactSource.from_value({"threadId": "t-9", "channel": "slack", "type": "conversation"})
    assert source == FactSource("conversation", "t-9", {"channel": "slack"})
    assert list(source.to_dict()) == ["threadId", "channel", "type"]
    assert FactSource.from_value({"type": "import"}).to_dict() == {"type": "import"}
    assert FactSource.from_value("manual").to_dict() == {"type": "manual", "threadId": None}
    assert hash(source) == hash(FactSource("conversation", "t-9"))


def test_a_title_that_is_the_first_line_is_no_title() -> None:
    content = "a" * 159 + " " + "b" * 40 + "\nsecond line"
    fact = Fact.from_dict(minimal(content=content, title="a" * 159 + " bbb"))
    assert fact.title is None  # the 160-character cut ends in a space: stripped, equal
    assert fact.heading() == "a" * 159
    assert Fact.from_dict(minimal(title="Use\u2028uv\r\nnow")).title == "Use uv  now"


def test_random_fact_ids_take_the_original_form() -> None:
    fact_id = random_fact_id()
    assert fact_id.startswith("fact_")
    assert len(fact_id) == 13
    assert int(fact_id[5:], 16) >= 0
    assert Fact.from_dict(minimal(id=fact_id)).id == fact_id


@given(st.lists(st.booleans(), min_size=1, max_size=ID_ATTEMPTS))
def test_a_new_fact_id_is_the_first_candidate_not_in_use(taken: list[bool]) -> None:
    """Candidates in use are skipped, in order; the first free one is returned."""
    taken[-1] = False
    candidates = iter(f"fact_{n:08x}" for n in range(len(taken)))
    in_use = {f"fact_{n:08x}" for n, used in enumerate(taken) if used}
    expected = f"fact_{taken.index(False):08x}"
    assert new_fact_id(in_use.__contains__, lambda: next(candidates)) == expected


def test_a_factory_that_keeps_returning_ids_in_use_is_reported() -> None:
    calls: list[str] = []

    def same() -> str:
        calls.append("fact_00000000")
        return "fact_00000000"

    with pytest.raises(ValueError, match="already in use 20 times"):
        new_fact_id({"fact_00000000"}.__contains__, same)
    assert len(calls) == ID_ATTEMPTS


@given(st.text(max_size=40), st.text(alphabet=" \t\n", max_size=3))
def test_duplicates_are_texts_equal_stripped_and_case_folded(text: str, pad: str) -> None:
    assert duplicate_key(pad + text + pad) == duplicate_key(text)
    assert duplicate_key(text.casefold()) == duplicate_key(text)
    assert duplicate_key(" Don't use PIP ") == duplicate_key("don't use pip")
    assert duplicate_digest(pad + text + pad) == duplicate_digest(text)
    assert len(duplicate_digest(text)) == 16
