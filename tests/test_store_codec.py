"""The on-disk formats: Markdown facts and memory.json, and how bad files are refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from deermem import CorruptMemoryFile, Fact, Memory, MemoryConfig
from deermem.model import CORE_CATEGORIES, FactScope, Scope, format_timestamp
from deermem.store import ChangeSet, Section, SummaryDocument
from deermem.store.markdown import files
from deermem.store.markdown.files import UserPaths, decode_fact, encode_fact
from deermem.store.plan import plan_changes
from deermem.store.records import decode_summaries, encode_summaries

SCOPE = Scope.of("alice", "coder")
PATH = Path("users/alice/agents/coder/facts/ab/fact_1a2b3c4d.md")
NOW = datetime(2026, 8, 13, tzinfo=UTC)


def a_fact(**changes: object) -> Fact:
    data: dict[str, object] = {
        "id": "fact_1a2b3c4d",
        "content": "Use uv, not pip.\nThe team standardised on it in 2025.",
        "category": "correction",
        "confidence": 0.9,
        "source": "thread-7",
        "createdAt": "2026-08-13T00:00:00Z",
        "sourceError": "The assistant suggested 'pip install'.",
    }
    data.update(changes)
    return Fact.from_dict(data)


def test_fact_file_is_the_original_format_byte_for_byte() -> None:
    """What the original writes for the same mapping (more: tests/test_store_original.py)."""
    text = encode_fact(a_fact(), SCOPE).decode("utf-8")
    assert text == (
        "---\n"
        "id: fact_1a2b3c4d\n"
        "category: correction\n"
        "confidence: 0.9\n"
        "source:\n"
        "  type: conversation\n"
        "  threadId: thread-7\n"
        "createdAt: '2026-08-13T00:00:00Z'\n"
        "sourceError: The assistant suggested 'pip install'.\n"
        "schemaVersion: 2\n"
        "status: active\n"
        "topics: []\n"
        "consolidatedFrom: []\n"
        "updatedAt: '2026-08-13T00:00:00Z'\n"
        "revision: 1\n"
        "user_id: alice\n"
        "agent_name: coder\n"
        "---\n"
        "\n"
        "# Use uv, not pip.\n"
        "\n"
        "Use uv, not pip.\n"
        "The team standardised on it in 2025.\n"
    )


def test_decode_restores_the_fact_with_the_directory_scope() -> None:
    fact = decode_fact(encode_fact(a_fact(), SCOPE), PATH, SCOPE, "fact_1a2b3c4d")
    assert fact == a_fact(scope={"userId": "alice", "agentName": "coder"})
    assert fact.scope == FactScope(userId="alice", agentName="coder")


def test_a_derived_title_follows_the_content_an_explicit_one_stays() -> None:
    derived = decode_fact(encode_fact(a_fact(), SCOPE), PATH, SCOPE, "fact_1a2b3c4d")
    assert derived.title is None
    edited = derived.replace(content="Use poetry.")
    assert b"# Use poetry." in encode_fact(edited, SCOPE)
    titled = a_fact(title="Package manager")
    again = decode_fact(encode_fact(titled, SCOPE), PATH, SCOPE, "fact_1a2b3c4d")
    assert again.title == "Package manager"
    assert again.content == titled.content


# --- property: Fact -> Markdown -> Fact is the identity -----------------------------

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
timestamps = st.integers(min_value=0, max_value=10**9).map(
    lambda s: format_timestamp(NOW - timedelta(seconds=s, microseconds=s % 7 * 1000))
)
facts = st.fixed_dictionaries(
    {
        "id": st.from_regex(r"[A-Za-z0-9_-]{1,40}", fullmatch=True),
        "content": text.filter(lambda t: bool(t.strip())),
        "category": st.one_of(st.sampled_from(CORE_CATEGORIES), text),
        "confidence": st.floats(min_value=0, max_value=1),
        "topics": st.lists(text, max_size=3),
        "createdAt": timestamps,
        "lastConfirmedAt": st.one_of(st.none(), timestamps),
        "confirmationCount": st.one_of(st.none(), st.integers(min_value=1, max_value=1000)),
        "sourceError": st.one_of(st.none(), text),
        "expected_valid_days": st.one_of(st.none(), st.integers(min_value=1, max_value=3650)),
        "title": st.one_of(st.none(), text),
    },
    optional={
        "custom": st.one_of(text, st.integers()),
        "origin": st.lists(text, max_size=2),
    },
).map(Fact.from_dict)


# PyYAML's pure-Python dumper, and libyaml's when PyYAML has it (the one encode_fact uses).
DUMPERS = [yaml.SafeDumper, *([yaml.CSafeDumper] if hasattr(yaml, "CSafeDumper") else [])]


@pytest.mark.parametrize("dumper", DUMPERS, ids=lambda dumper: dumper.__name__)
@settings(max_examples=150)
@given(fact=facts)
def test_markdown_round_trip_is_the_identity(dumper: type, fact: Fact) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(files, "_DUMPER", dumper)
        data = encode_fact(fact, SCOPE)
    decoded = decode_fact(data, PATH, SCOPE, fact.id)
    stored = fact.replace(scope={"userId": "alice", "agentName": "coder"})
    heading = fact.heading()
    if fact.title is not None and fact.title == stored.replace(title=None).heading():
        stored = stored.replace(title=None)
    assert decoded == stored
    assert decoded.heading() == heading


@pytest.mark.parametrize("dumper", DUMPERS, ids=lambda dumper: dumper.__name__)
def test_next_line_characters_survive_either_dumper(dumper: type) -> None:
    """PyYAML's own dumper writes U+0085 raw, and reads it back as a space."""
    fact = a_fact(sourceError="one\x85two", topics=["\x85", "été"])
    assert yaml.safe_load(yaml.safe_dump({"s": "one\x85two"}, allow_unicode=True)) != {
        "s": "one\x85two"
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(files, "_DUMPER", dumper)
        data = encode_fact(fact, SCOPE)
    assert "\x85".encode() not in data
    decoded = decode_fact(data, PATH, SCOPE, fact.id)
    assert (decoded.sourceError, decoded.topics) == ("one\x85two", ("\x85", "été"))


# --- corruption is an error naming the file and the problem ----------------------------

GOOD = encode_fact(a_fact(), SCOPE)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"id: fact_1a2b3c4d\n", "does not start with YAML front matter"),  # no front matter
        (b"---\nid: fact_1a2b3c4d\n", "not closed"),  # unterminated
        (b"---\nid: [unclosed\n---\n\n# x\n\nx\n", "not valid YAML"),
        (b"---\n- a list\n---\n\n# x\n\nx\n", "must be a mapping"),
        (GOOD.replace(b"id: fact_1a2b3c4d", b"id: fact_other"), "does not match the file name"),
        (GOOD.replace(b"agent_name: coder", b"agent_name: writer"), "scope mismatch"),
        (GOOD.replace(b"user_id: alice", b"user_id: mallory"), "scope mismatch"),
        (GOOD.replace(b"confidence: 0.9", b"confidence: high"), "'confidence'"),
        (GOOD.replace(b"topics: []", b"topics: python"), "'topics'"),
        (GOOD.replace(b"revision: 1", b"revision: [1]"), "'revision'"),
        (GOOD.replace(b"status: active", b"status: superseded"), "'status'"),
        (GOOD.replace(b"id: fact_1a2b3c4d\n", b"id: fact_1a2b3c4d\ncontent: x\n"), "'content'"),
        (GOOD.split(b"# Use")[0], "invalid fact"),  # no content
        (b"\xff\xfe" + GOOD, "not UTF-8"),
        (b"\xef\xbb\xbf" + GOOD, "starts with a UTF-8 byte-order mark (BOM)"),
        (b"\xef\xbb\xbf" + GOOD.replace(b"\n", b"\r\n"), "byte-order mark"),
        (GOOD.replace(b"\n", b"\r"), "ends in a carriage return alone"),
        (
            GOOD.replace(b"confidence: 0.9\n", b"confidence: 0.9\nconfidence: 0.1\n"),
            "front-matter key 'confidence' appears twice (again on line 5)",
        ),
        (
            GOOD.replace(b"  type: conversation\n", b"  type: conversation\n  type: manual\n"),
            "front-matter key 'type' appears twice",
        ),
        (
            GOOD.replace(b"revision: 1\n", b"revision: 1\nextra: {a: 1, a: 2}\n"),
            "front-matter key 'a' appears twice",
        ),
        (
            GOOD.replace(b"revision: 1\n", b"revision: 1\nx: {<<: {a: 1}, y: 1, y: 2}\n"),
            "front-matter key 'y' appears twice",
        ),
        (
            GOOD.replace(b"revision: 1\n", b"revision: 1\nbase: &b {a: 1}\nx: {<<: *b}\n"),
            "the front-matter value anchored on line 16 is repeated by an alias (*name)",
        ),
        (
            GOOD.replace(b"revision: 1\n", b"revision: 1\nx: &x 1\ny: *x\n"),
            "is repeated by an alias (*name), which is not read: write each value out",
        ),
    ],
)
def test_a_malformed_fact_file_is_an_error_that_names_it(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptMemoryFile) as caught:
        decode_fact(data, PATH, SCOPE, "fact_1a2b3c4d")
    assert caught.value.path == str(PATH)
    assert problem in str(caught.value)
    assert str(PATH) in str(caught.value)


# Files as deermem writes them (every field but a raw carriage return, which a
# Windows editor's CRLF cannot be told from).
lf_files = facts.map(lambda fact: (fact, encode_fact(fact, SCOPE))).filter(
    lambda pair: b"\r" not in pair[1]
)


@settings(max_examples=150)
@given(pair=lf_files)
def test_a_fact_file_saved_with_crlf_reads_as_the_file_deermem_wrote(
    pair: tuple[Fact, bytes],
) -> None:
    fact, written = pair
    expected = decode_fact(written, PATH, SCOPE, fact.id)
    crlf = written.replace(b"\n", b"\r\n")
    assert decode_fact(crlf, PATH, SCOPE, fact.id) == expected
    # The next commit of the fact writes what deermem writes, whichever file it read.
    assert encode_fact(decode_fact(crlf, PATH, SCOPE, fact.id), SCOPE) == encode_fact(
        expected, SCOPE
    )


@settings(max_examples=150)
@given(fact=facts)
@example(fact=a_fact(content="one\rtwo\r\nthree", sourceError="x\ry"))
def test_a_file_deermem_wrote_reads_byte_for_byte_carriage_returns_included(fact: Fact) -> None:
    # Only a file whose opening line ends in CRLF has its line ends read as LF.
    written = encode_fact(fact, SCOPE)
    assert decode_fact(written, PATH, SCOPE, fact.id).content == fact.content


def test_repeated_keys_are_refused_and_merge_keys_still_read() -> None:
    merged = GOOD.replace(b"revision: 1\n", b"revision: 1\nx: {<<: {a: 1, y: 0}, y: 2}\n")
    fact = decode_fact(merged, PATH, SCOPE, "fact_1a2b3c4d")
    assert fact.to_dict()["x"] == {"a": 1, "y": 2}
    assert (
        files._user_id_in(GOOD.replace(b"user_id: alice\n", b"user_id: alice\nuser_id: bob\n"))
        is None
    )


def test_a_front_matter_of_aliases_is_refused_at_once(tmp_path: Path) -> None:
    """Nine lines of aliases in an unknown key (a billion values) wedged every read of the
    scope: each value was copied whole before the fact's size check could stop it."""
    bomb = b"l0: &a0 [x]\n" + b"".join(
        f"l{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]\n".encode() for n in range(1, 10)
    )
    memory = Memory.open(tmp_path, MemoryConfig(), user="alice", agent="coder")
    fact_id = memory.create_fact("Use uv, not pip.").fact_id
    assert fact_id is not None
    path = UserPaths(tmp_path, "alice", "memory.json").agent("coder").fact(fact_id)
    path.write_bytes(path.read_bytes().replace(b"revision: 1\n", b"revision: 1\n" + bomb))
    with pytest.raises(CorruptMemoryFile) as caught:
        memory.reload()
    assert caught.value.path == str(path)
    assert "is repeated by an alias (*name)" in str(caught.value)


def test_a_value_a_fact_holds_twice_is_written_out_twice_and_reads_back() -> None:
    """PyYAML writes a list met twice as an anchor and an alias, which deermem refuses to
    read: a fact given one list under two keys is written as two lists."""
    shared = ["a", "b"]
    fact = a_fact(first=shared, second=shared)
    written = encode_fact(fact, SCOPE)
    assert b"&" not in written
    assert b"*" not in written
    assert decode_fact(written, PATH, SCOPE, fact.id).extra == {"first": shared, "second": shared}


def test_a_hand_written_file_without_scope_keys_belongs_to_its_directory() -> None:
    data = b"---\nid: fact_hand\ncategory: goal\ncreatedAt: 2026-08-01T10:00:00Z\n---\n\nShip v1.\n"
    fact = decode_fact(data, PATH, SCOPE, "fact_hand")
    assert fact.content == "Ship v1."
    assert fact.scope == FactScope(userId="alice", agentName="coder")
    assert fact.createdAt == "2026-08-01T10:00:00Z"  # an unquoted YAML timestamp


def test_yaml_timestamps_in_unknown_keys_read_as_the_text_they_show(tmp_path: Path) -> None:
    """An unquoted date in a hand-edited file: a fact also goes to JSON (archive, export)."""
    front = GOOD.split(b"---\n")[1]
    extra = b"reviewedAt: 2026-01-02\nnested:\n  at: 2026-01-02 10:00:00\n  2026-01-03: key\n"
    data = b"---\n" + front + extra + b"---\n\n# Use uv\n\nUse uv, not pip.\n"
    fact = decode_fact(data, PATH, SCOPE, "fact_1a2b3c4d")
    assert fact.extra == {
        "reviewedAt": "2026-01-02",
        "nested": {"at": "2026-01-02T10:00:00", "2026-01-03": "key"},
    }
    path = UserPaths(tmp_path, "alice", "memory.json").agent("coder").fact("fact_1a2b3c4d")
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    memory = Memory.open(tmp_path, MemoryConfig(), user="alice", agent="coder", clock=lambda: NOW)
    json.dumps(memory.export_document())
    memory.delete_fact("fact_1a2b3c4d")  # to the archive, a JSON file
    assert memory.get_archived("fact_1a2b3c4d").fact.extra == fact.extra


# --- memory.json ------------------------------------------------------------------------


def test_summary_document_round_trip_and_keys() -> None:
    document = SummaryDocument(
        version="2.0",
        revision=4,
        lastUpdated="2026-08-13T00:00:00Z",
        user={**SummaryDocument().user, "workContext": Section("Payments team", "2026-08-01Z")},
    )
    data = encode_summaries(document)
    assert list(json.loads(data)) == ["version", "revision", "lastUpdated", "user", "history"]
    assert decode_summaries(data, PATH) == document


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
_SECTIONS = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=())),  # lone surrogates too
    st.builds(
        lambda summary, updated, extra: Section(summary, updated, extra),
        st.text(),
        st.text(),
        st.dictionaries(
            st.text(max_size=5).filter(lambda key: key not in ("summary", "updatedAt")),
            _JSON_VALUES,
            max_size=2,
        ),
    ),
)


@settings(max_examples=200)
@given(
    st.dictionaries(
        st.sampled_from(
            [("user", "workContext"), ("user", "topOfMind"), ("history", "recentMonths")]
        ),
        _SECTIONS,
        max_size=3,
    )
)
def test_the_document_a_commit_writes_reads_back_as_planned(
    summaries: dict[tuple[str, str], str | Section],
) -> None:
    """The Markdown store keeps the document it wrote as what its bytes read back as
    (a commit then decodes nothing): that holds for every document a commit plans."""
    current = decode_summaries(encode_summaries(SummaryDocument()), PATH)
    changes = ChangeSet(now=datetime(2026, 1, 1, tzinfo=UTC), summaries=summaries)
    plan = plan_changes(lambda _: None, current, changes, Scope.of("alice"), lambda _: False)
    assert decode_summaries(encode_summaries(plan.summaries), PATH) == plan.summaries


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "expected a JSON object, found list"),
        (b'{"version": "1.0", "facts": [{"id": "x"}]}', "version-1 document"),
        (b'{"revision": "3"}', "'revision'"),
        (b'{"user": []}', "'user' must be an object"),
        (b'{"history": {"recentMonths": "Shipped v2."}}', "history.recentMonths"),
    ],
)
def test_a_malformed_summary_document_is_an_error(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptMemoryFile, match=problem):
        decode_summaries(data, PATH)


def test_an_empty_version_one_document_reads_as_summaries() -> None:
    document = decode_summaries(b'{"version": "1.0", "facts": []}', PATH)
    assert document.version == "1.0"
    assert document.revision == 0
