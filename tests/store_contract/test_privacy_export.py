"""Exporting a user, on both stores: export, erase, import gives the user back (issue 26)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

import pytest

from deermem import FactValidationError, Memory, MemoryConfig
from deermem.store.migrate import USER_EXPORT_FORMAT, USER_EXPORT_VERSION
from tests.store_contract.conftest import Stores
from tests.store_contract.test_privacy_erase import ERIN, FRANK, populate

NOW = datetime(2026, 8, 13, tzinfo=UTC)


def everything(memory: Memory, user: str) -> list[object]:
    """Every fact, archive entry and receipt of the user's agents, and the summaries."""
    views = [memory.scoped(user=user, agent=agent) for agent in ("coder", "writer")]
    return [
        memory.scoped(user=user, agent="coder").summaries(),
        *((v.list_facts(), v.list_archived(), v.audit()) for v in views),
    ]


def test_export_erase_import_gives_back_every_fact_archive_entry_and_receipt(
    stores: Stores,
) -> None:
    erin = populate(stores, ERIN)
    populate(stores, FRANK, agents=("coder",))
    before = everything(erin, ERIN)
    unscoped = Memory(stores(), MemoryConfig(), None, clock=lambda: NOW)

    document = unscoped.export_user(ERIN)
    wire = json.loads(json.dumps(document))  # it is plain JSON
    assert wire["format"] == USER_EXPORT_FORMAT
    assert wire["version"] == USER_EXPORT_VERSION
    assert wire["userId"] == ERIN
    assert sorted(wire["agents"]) == ["coder", "writer"]
    coder = wire["agents"]["coder"]
    assert len(coder["facts"]) == 9
    assert len(coder["archive"]) == 3
    assert coder["events"]
    assert coder["usage"]

    assert unscoped.erase_user(ERIN).erased
    assert everything(erin, ERIN) != before
    restored = unscoped.import_user(wire)
    assert restored.counts["facts"] == 18
    assert restored.counts["archived"] == 6
    erin.store.reload(erin.scoped(user=ERIN, agent="coder").scope)
    assert everything(stores.memory(MemoryConfig(), user=ERIN), ERIN) == before
    # The export of the restored user is the same document (its time aside).
    again = unscoped.export_user(ERIN)
    assert {**again, "exportedAt": ""} == {**document, "exportedAt": ""}


def test_an_import_refuses_a_user_the_store_holds_and_a_document_that_is_not_an_export(
    stores: Stores,
) -> None:
    populate(stores, ERIN, agents=("coder",))
    memory = Memory(stores(), MemoryConfig(), None, clock=lambda: NOW)
    document = memory.export_user(ERIN)
    with pytest.raises(FactValidationError, match="already holds this user"):
        memory.import_user(document)
    with pytest.raises(FactValidationError, match="format"):
        memory.import_user({"facts": []})
    broken = json.loads(json.dumps(document))
    broken["agents"]["coder"]["archive"][0]["fact"] = "not a fact"
    memory.erase_user(ERIN)
    with pytest.raises(FactValidationError, match=r"agents\.coder\.archive\[0\]"):
        memory.import_user(broken)
    assert memory.scoped(user=ERIN, agent="coder").list_facts() == ()


_GITHUB: Final = "ghp" + "_Hh3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5b"  # a fake token, split


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        (
            "revision",
            _GITHUB,
            "has a text of 41 characters; expected a whole number from 0 to 9223372036854775807",
        ),
        ("version", [f"password={_GITHUB}"], "has a list of 1 items; expected a text"),
        ("lastUpdated", {"note": _GITHUB}, "has a mapping of 1 keys; expected a text"),
    ],
    ids=["revision", "version", "lastUpdated"],
)
def test_an_import_names_a_bad_summary_field_and_never_quotes_its_value(
    stores: Stores, field: str, value: object, said: str
) -> None:
    # The refusal quoted the value ("found 'ghp_…'": a secret came back in it) and said
    # "field 'summaries' has value None".
    populate(stores, ERIN, agents=("coder",))
    memory = Memory(stores(), MemoryConfig(), None, clock=lambda: NOW)
    document = json.loads(json.dumps(memory.export_user(ERIN)))
    memory.erase_user(ERIN)
    document["summaries"][field] = value
    with pytest.raises(FactValidationError) as caught:
        memory.import_user(document)
    assert str(caught.value) == f"field 'summaries.{field}' {said}"
    assert caught.value.field == f"summaries.{field}"
    assert "Hh3dE5" not in str(caught.value)
    document["summaries"] = [_GITHUB]
    with pytest.raises(FactValidationError) as caught:
        memory.import_user(document)
    assert str(caught.value) == "field 'summaries' has a list of 1 items; expected an object"


def test_an_unknown_user_exports_as_an_empty_document(stores: Stores) -> None:
    memory = Memory(stores(), MemoryConfig(), None, clock=lambda: NOW)
    document = memory.export_user("nobody-here")
    assert document["agents"] == {}
    assert document["userId"] == "nobody-here"


STAMP = "2026-08-13T00:00:00Z"


@pytest.mark.parametrize(
    ("field", "change"),
    [
        (
            r"agents\.coder\.usage'",
            lambda part: part["usage"].update(
                {"fact_\u0000x": {"accessHeat": 1.0, "accessCount": 1, "lastAccessedAt": STAMP}}
            ),
        ),
        (
            r"agents\.coder\.usage\.fact_\w+\.lastAccessedAt",
            lambda part: next(iter(part["usage"].values())).update({"lastAccessedAt": "2026\0"}),
        ),
        (
            r"agents\.coder\.usage\.fact_\w+\.lastAccessedAt",
            lambda part: next(iter(part["usage"].values())).update(
                {"lastAccessedAt": STAMP + "\0"}
            ),
        ),
        (
            r"agents\.coder\.shadowMarks",
            lambda part: part.update(
                {"shadowMarks": {"x\u0000y": {"policyVersion": "confidence"}}}
            ),
        ),
        (
            r"agents\.coder\.archive\[0\]\.archivedAt",
            lambda part: part["archive"][0].update({"archivedAt": STAMP + "\0"}),
        ),
        (
            r"agents\.coder\.usage\.fact_\w+",  # a count no bigint holds: not a usage entry
            lambda part: next(iter(part["usage"].values())).update({"accessCount": 2**70}),
        ),
        (
            r"fact 'fact_\w+': field 'revision'",
            lambda part: part["facts"][0].update({"revision": 2**63}),
        ),
    ],
)
def test_records_one_store_could_keep_and_the_other_not_are_refused_by_both_naming_the_field(
    stores: Stores, field: str, change: Callable[[dict[str, Any]], None]
) -> None:
    """U+0000 in a usage or shadow-mark key, a recall's or an archive entry's time, and a
    revision or count of 2**63 or more: the Markdown store imported them and PostgreSQL
    refused with "text fields cannot contain NUL" or "bigint out of range", naming no
    field. Both now refuse them alike, naming the field, and change nothing."""
    populate(stores, ERIN, agents=("coder",))
    memory = Memory(stores(), MemoryConfig(), None, clock=lambda: NOW)
    document = json.loads(json.dumps(memory.export_user(ERIN)))
    memory.erase_user(ERIN)
    change(document["agents"]["coder"])
    with pytest.raises(FactValidationError, match=field):
        memory.import_user(document)
    assert memory.scoped(user=ERIN, agent="coder").list_facts() == ()


def test_a_usage_key_that_is_no_fact_id_is_never_quoted_even_with_a_bad_entry(
    stores: Stores,
) -> None:
    """The key was quoted in the field's name (``usage.my password is hunter2``) when its
    entry was malformed too; it is described by its length, as with a good entry."""
    populate(stores, ERIN, agents=("coder",))
    memory = Memory(stores(), MemoryConfig(), None, clock=lambda: NOW)
    document = json.loads(json.dumps(memory.export_user(ERIN)))
    memory.erase_user(ERIN)
    document["agents"]["coder"]["usage"] = {"my password is hunter2": {"accessHeat": 1.0}}
    with pytest.raises(FactValidationError) as refused:
        memory.import_user(document)
    assert "hunter2" not in str(refused.value)
    assert str(refused.value) == (
        "field 'agents.coder.usage' has a text of 22 characters; expected fact ids as its keys"
    )


def test_a_summaries_revision_no_bigint_holds_is_refused_by_both(stores: Stores) -> None:
    populate(stores, ERIN, agents=("coder",))
    memory = Memory(stores(), MemoryConfig(), None, clock=lambda: NOW)
    document = json.loads(json.dumps(memory.export_user(ERIN)))
    memory.erase_user(ERIN)
    document["summaries"]["revision"] = 2**70
    expected = r"summaries\.revision.*expected a whole number from 0 to"
    with pytest.raises(FactValidationError, match=expected):
        memory.import_user(document)
