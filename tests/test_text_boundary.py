"""What the store accepts, it reads back: one text boundary for every path.

Text that reaches a file passes deermem.model: a lone surrogate (what an
undecodable byte becomes) is refused on every path with an error naming the
field; text written by hand or by a model also keeps to the one-line and
length limits of extracted facts. Whatever the writer accepts, a fresh
process reads back field for field.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deermem import (
    DuplicateFactError,
    Fact,
    FactValidationError,
    Memory,
    MemoryConfig,
    UnsafeIdentifierError,
)
from deermem.cli import main
from deermem.errors import InvalidTextError
from deermem.learning.answer import NormalizedResponse, normalize_response
from deermem.model import (
    CORE_CATEGORIES,
    MAX_NESTING,
    Scope,
    check_line,
    check_lines,
    check_storable,
)
from deermem.store import ChangeSet, FactWrite, MarkdownStore
from deermem.testing import ScriptedChatServer
from tests.wire_support import (
    CHAT,
    NOW,
    close_memories,  # noqa: F401 (autouse fixture)
    counting_ids,
    new_fact,
    open_memory,
    tree,
)

ALICE = Scope.of("alice", "coder")

# --- the checks themselves -------------------------------------------------------------


@given(st.text(st.characters(exclude_categories=())))
def test_storable_text_is_text_that_utf8_can_write(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        with pytest.raises(InvalidTextError) as caught:
            check_storable("field", text)
        assert 0xD800 <= ord(caught.value.character) <= 0xDFFF
        assert text[caught.value.position] == caught.value.character
    else:
        check_storable("field", text)


@pytest.mark.parametrize(
    ("value", "field", "message"),
    [
        ("c\udcffat", "f", "byte 0xFF at position 1 is not UTF-8"),  # argv's surrogateescape
        ("x\ud800", "f", "U+D800 at position 1 is a lone surrogate"),  # a JSON "\ud800"
        ({"k": ["ok", "b\udc80d"]}, "f.k[1]", "byte 0x80 at position 1"),  # nested
        ({"\udcff": 1}, "f key", "byte 0xFF at position 0"),  # a key
    ],
)
def test_a_lone_surrogate_is_refused_anywhere_naming_where(
    value: object, field: str, message: str
) -> None:
    with pytest.raises(InvalidTextError, match=re.escape(message)) as caught:
        check_storable("f", value)
    assert caught.value.field == field
    assert isinstance(caught.value, FactValidationError)


@pytest.mark.parametrize("value", [object(), {("a",): 1}, {1, 2}, b"bytes", NOW])
def test_values_yaml_and_json_cannot_both_hold_are_refused(value: object) -> None:
    """A fact goes to front matter, archive entries and exports alike."""
    with pytest.raises(FactValidationError):
        check_storable("f", value)
    check_storable("f", ("a", ["b", {"c": None, 1: 2.5}]))  # a tuple is written as a list


@settings(max_examples=60)
@given(
    depth=st.one_of(st.integers(0, 40), st.integers(41, 20_000)),
    shapes=st.lists(st.sampled_from(["list", "tuple", "dict"]), min_size=1, max_size=3),
)
def test_nesting_past_the_bound_is_refused_and_never_recursed_into(
    depth: int, shapes: list[str]
) -> None:
    """However deep a reader built a value, the check answers without recursing."""
    value: object = "leaf"
    for level in range(depth):
        shape = shapes[level % len(shapes)]
        value = [value] if shape == "list" else (value,) if shape == "tuple" else {"k": value}
    if depth <= MAX_NESTING:
        assert check_storable("f", value) == 2 * depth + 5 - sum(
            shapes[level % len(shapes)] != "dict" for level in range(depth)
        )
        return
    with pytest.raises(FactValidationError, match=f"nested at most {MAX_NESTING} deep") as caught:
        check_storable("f", value)
    assert caught.value.field.startswith("f")
    assert "leaf" not in str(caught.value)  # never the value itself


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ("abc", 4),  # one value, three characters
        ([1, "ab"], 5),  # the list, 1, "ab"
        ({"key": None}, 5),  # the mapping, its key's characters, None
    ],
)
def test_a_values_size_counts_its_text_and_its_values(value: object, size: int) -> None:
    assert check_storable("f", value) == size
    check_storable("f", value, max_size=size)
    with pytest.raises(FactValidationError, match="at most"):
        check_storable("f", value, max_size=size - 1)


@pytest.mark.parametrize(
    "text", ["a\nb", "a\rb", "tab\there", "nul\x00", "esc\x1b[31m", "nel\x85", "ls\u2028", "\x7f"]
)
def test_one_line_fields_hold_no_control_character_or_line_break(text: str) -> None:
    with pytest.raises(InvalidTextError, match="control character") as caught:
        check_line("category", text, 64)
    assert caught.value.field == "category"


def test_multi_line_fields_hold_lines_tabs_and_separators_but_no_other_control() -> None:
    assert check_lines("content", "a\r\nb\tc\u2028d", 100) == "a\r\nb\tc\u2028d"
    for text in ("nul\x00", "bell\x07", "esc\x1b", "nel\x85", "del\x7f"):
        with pytest.raises(InvalidTextError):
            check_lines("content", text, 100)
    with pytest.raises(FactValidationError, match="at most 3 characters, found 4"):
        check_lines("content", "four", 3)


# --- facts written by hand: the limits of extracted facts --------------------------------


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    return Memory.open(
        tmp_path, MemoryConfig(), user="alice", agent="coder", clock=lambda: NOW,
        id_factory=counting_ids(),
    )  # fmt: skip


BAD_CREATES: dict[str, tuple[dict[str, Any], str]] = {
    "a 120 KB fact": ({"content": "x" * 120_000}, "content"),
    "content just over the limit": ({"content": "y" * 4_001}, "content"),
    "an undecodable byte in content": ({"content": "c\udcffat"}, "content"),
    "a NUL in content": ({"content": "a\x00b"}, "content"),
    "a 200-character multi-line category": ({"category": "ab\n" * 66 + "xy"}, "category"),
    "a 200-character category": ({"category": "c" * 200}, "category"),
    "an undecodable byte in the category": ({"category": "c\udcffat"}, "category"),
    "a topic over two lines": ({"topics": ["a\nb"]}, "topics[0]"),
    "a lone surrogate in a topic": ({"topics": ["ok", "\ud800"]}, "topics[1]"),
    "too many topics": ({"topics": [f"t{i}" for i in range(33)]}, "topics"),
    "a 3,000-character sourceError": ({"source_error": "s" * 3_000}, "sourceError"),
}  # fmt: skip


@pytest.mark.parametrize(("changes", "field"), BAD_CREATES.values(), ids=BAD_CREATES.keys())
def test_a_fact_written_by_hand_keeps_the_limits_of_extracted_ones(
    memory: Memory, tmp_path: Path, changes: dict[str, Any], field: str
) -> None:
    memory.create_fact("Already here.")
    before = tree(tmp_path)
    arguments: dict[str, Any] = {"content": "A fact.", **changes}
    with pytest.raises(FactValidationError) as caught:
        memory.create_fact(arguments.pop("content"), **arguments)
    assert caught.value.field == field
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"content": "x" * 120_000}, "content"),
        ({"content": "bad \udcff byte"}, "content"),
        ({"category": "two\nlines"}, "category"),
        ({"category": "c" * 65}, "category"),
    ],
)
def test_an_edit_keeps_the_same_limits(
    memory: Memory, tmp_path: Path, changes: dict[str, Any], field: str
) -> None:
    fact_id = memory.create_fact("A fact.").fact_id
    assert fact_id is not None
    before = tree(tmp_path)
    with pytest.raises(FactValidationError) as caught:
        memory.update_fact(fact_id, **changes)
    assert caught.value.field == field
    assert tree(tmp_path) == before


def test_limits_are_inclusive(memory: Memory) -> None:
    result = memory.create_fact(
        "z" * 4_000, category="k" * 64, topics=["t" * 64] * 32, source_error="s" * 2_000
    )
    assert result.fact_id is not None
    assert memory.get_fact(result.fact_id).categoryExtension == "k" * 64


def test_a_user_id_that_is_not_text_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsafeIdentifierError, match="byte 0xFF"):
        Memory.open(tmp_path, MemoryConfig(), user="al\udcffice")
    assert list(tmp_path.iterdir()) == []


# --- the command line: one line, status 1, nothing changed ----------------------------------


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ([b"facts", b"add", b"ok", b"-c", b"c\xffat"], "'category'"),
        ([b"facts", b"add", b"c\xffat"], "'content'"),
        ([b"facts", b"add", b"ok", b"-t", b"two\nlines"], "'topics[0]'"),
        ([b"facts", b"add", b"x" * 5_000], "'content'"),
        ([b"--user", b"al\xffice", b"facts", b"add", b"ok"], "user id"),
    ],
)
def test_the_cli_refuses_bad_text_in_one_line_and_changes_nothing(
    tmp_path: Path, arguments: list[bytes], field: str
) -> None:
    """Real argv bytes, in a real process: what a shell passes."""
    root = tmp_path / "store"
    assert main(["--root", str(root), "init"]) == 0  # a store: the CLI writes only into one
    environment = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    command = [sys.executable.encode(), b"-m", b"deermem", b"--root", os.fsencode(root)]
    finished = subprocess.run(
        [*command, *arguments], capture_output=True, env=environment, timeout=60, check=False
    )
    error = finished.stderr.decode("utf-8")
    assert finished.returncode == 1, error
    assert error.count("\n") == 1, error
    assert error.startswith("error: ")
    assert field in error
    assert "Traceback" not in error
    assert finished.stdout == b""
    assert [path.name for path in root.iterdir()] == ["deermem.yaml"]  # init's, and nothing else


def test_an_edit_from_the_cli_is_refused_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(tmp_path)
    assert main(["--root", root, "init"]) == 0
    capsys.readouterr()
    assert main(["--root", root, "facts", "add", "A fact.", "--json"]) == 0
    fact_id = json.loads(capsys.readouterr().out)["factId"]
    before = tree(tmp_path)
    assert main(["--root", root, "facts", "edit", fact_id, "-c", "a\udcffb"]) == 1
    assert "field 'category'" in capsys.readouterr().err
    assert tree(tmp_path) == before


# --- a model's answer: the entry is dropped and counted, the store stays readable ---------


def test_normalisation_drops_entries_whose_text_cannot_be_stored() -> None:
    response = normalize_response(
        {
            "newFacts": [
                new_fact("Likes tea.", category="x\ud800"),
                new_fact("Likes \udcff coffee."),
                new_fact("Likes cocoa.", sourceError="bad \ud800"),
                new_fact("Likes two\nline categories.", category="two\nlines"),
                new_fact("Likes water."),
            ],
            "user": {"workContext": {"summary": "bad \ud800", "shouldUpdate": True}},
            "factsToReinforce": [{"id": "fact_\ud800", "scope": "user", "reason": "r"}],
        }
    )
    assert isinstance(response, NormalizedResponse)
    assert [fact.content for fact in response.new_facts] == ["Likes water."]
    assert response.malformed_new_facts == 4
    assert response.summaries == ()
    assert response.reinforce == ()


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


def test_a_model_answer_with_a_lone_surrogate_leaves_a_readable_store(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, agent="coder")
    # json.dumps escapes the surrogate, as a model's JSON would: "x\ud800".
    server.enqueue(
        json.dumps(
            {
                "user": {},
                "history": {},
                "newFacts": [new_fact("Likes tea.", category="x\ud800"), new_fact("Likes water.")],
            }
        )
    )
    report = memory.learn("thread-1", CHAT).report
    assert report.metrics.malformed_new_facts == 1
    assert len(report.added) == 1
    fresh = Memory.open(tmp_path, MemoryConfig(), user="alice", agent="coder")
    assert [fact.content for fact in fresh.list_facts()] == ["Likes water."]


def test_a_conversation_with_a_lone_surrogate_reaches_the_model_escaped(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    """Messages are not stored, only sent: JSON escapes what UTF-8 cannot carry."""
    memory = open_memory(tmp_path, server, agent="coder")
    server.enqueue(json.dumps({"user": {}, "history": {}, "newFacts": [new_fact("Uses uv.")]}))
    chat = [{"role": "user", "content": "I use uv \ud800 always."}, CHAT[1]]
    assert len(memory.learn("thread-1", chat).report.added) == 1
    assert "I use uv \ud800 always." in server.requests[0].messages[1]["content"]


@pytest.mark.parametrize("thread_id", ["thread-\udcff", "two\nlines", "t" * 257, "", "  \u3000"])
def test_a_thread_id_that_cannot_be_a_source_is_refused_before_the_model_is_asked(
    tmp_path: Path, server: ScriptedChatServer, thread_id: str
) -> None:
    memory = open_memory(tmp_path, server, agent="coder")
    with pytest.raises(FactValidationError) as caught:
        memory.learn(thread_id, CHAT)
    assert caught.value.field == "threadId"
    with pytest.raises(FactValidationError):
        memory.queue_conversation(thread_id, CHAT)
    assert server.requests == []
    assert list(tmp_path.iterdir()) == []


# --- property: whatever the writer accepts, a fresh process reads back ------------------------

# YAML and Markdown specials, line breaks of every kind, and undecodable input.
TRICKY = [
    "yes", "No", "~", "null", "0x10", "1e3", "012", "#x", "x ", " x", "---", "...", "- x",
    "key: v", "'", '"', "\\", "\t", "\r\n", "\r", "\n", "\n---\n", "\n# h\n", "\u2028", "\u2029",
    "\x85", "\x00", "\x1b", "\x7f", "\ufeff", "\ufffe", "😀", "名前", "é", "\U0010ffff", "\udcff",
    "\ud800", "# ", " ", "a" * 159 + " ", "b" * 170,
]  # fmt: skip
texts = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=30),
    st.lists(st.sampled_from(TRICKY), max_size=6).map("".join),
    st.lists(st.one_of(st.sampled_from(TRICKY), st.text(max_size=5)), max_size=8).map("".join),
)
plain = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), texts),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=6,
)
stamps = st.sampled_from(["2026-08-13T00:00:00Z", "2026-06-02T10:00:00.000001Z", "", " "])
stored_facts = st.fixed_dictionaries(
    {
        "id": st.from_regex(r"[A-Za-z0-9_-]{1,250}", fullmatch=True),
        "content": texts,
        "category": st.one_of(st.sampled_from(CORE_CATEGORIES), texts),
        "confidence": st.floats(min_value=0, max_value=1),
        "createdAt": stamps,
    },
    optional={
        "title": texts,
        "categoryExtension": texts,
        "topics": st.lists(texts, max_size=3),
        "sourceError": texts,
        "source": st.one_of(
            texts,
            st.fixed_dictionaries(
                {"type": texts}, optional={"threadId": st.one_of(st.none(), texts), "x": plain}
            ),
        ),
        "lastConfirmedAt": stamps,
        "confirmationCount": st.integers(min_value=1, max_value=9),
        "expected_valid_days": plain,
        "custom": plain,
        "yes": plain,
    },
).flatmap(
    lambda data: st.tuples(
        st.permutations(list(data.items())), st.dictionaries(texts, plain, max_size=2)
    ).map(lambda drawn: {**drawn[1], **dict(drawn[0])})
)
created_facts = st.fixed_dictionaries(
    {"content": texts, "category": texts, "topics": st.lists(texts, max_size=3)},
    optional={"source_error": texts},
)

READER = """
import json, sys
from pathlib import Path
from deermem.store import MarkdownStore
from deermem.model import Scope
snapshot = MarkdownStore(Path(sys.argv[1])).load(Scope.of("alice", "coder"))
facts = {fact.id: [list(fact.to_dict().items()), fact.heading()] for fact in snapshot.facts}
print(json.dumps({"facts": facts, "summaries": snapshot.summaries.to_dict()}))
"""
BODY = {"content", "title", "scope"}


def described(fact: Fact) -> list[object]:
    """A fact as the reader prints it, its front-matter keys in their order."""
    items = [[key, value] for key, value in fact.to_dict().items()]
    order = [key for key, _ in items if key not in BODY]
    return [dict(json.loads(json.dumps(items))), order, fact.heading()]


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(
    stored=st.lists(stored_facts, max_size=12),
    created=st.lists(created_facts, max_size=6),
    summaries=st.lists(texts, max_size=2),
)
def test_whatever_the_writer_accepts_a_fresh_process_reads_back(
    stored: list[dict[str, Any]], created: list[dict[str, Any]], summaries: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        store = MarkdownStore(root)
        written: dict[str, Fact] = {}
        keys = [("user", "workContext"), ("history", "recentMonths")]
        sections = dict(zip(keys, summaries, strict=False))
        if sections:
            store.commit(ALICE, ChangeSet(now=NOW, summaries=sections))
        for data in stored:
            try:
                fact = Fact.from_dict(data)
            except FactValidationError:
                continue  # refused, with an error naming the field
            if fact.id in written:
                continue
            commit = store.commit(ALICE, ChangeSet(now=NOW, writes=(FactWrite(fact, True),)))
            written[fact.id] = commit.written[0]
        memory = Memory.open(
            root, MemoryConfig(), user="alice", agent="coder", clock=lambda: NOW,
            id_factory=counting_ids("fact_made_"),
        )  # fmt: skip
        for data in created:
            arguments = dict(data)
            try:
                result = memory.create_fact(arguments.pop("content"), **arguments)
            except (FactValidationError, DuplicateFactError):
                continue
            written[result.fact.id] = result.fact
        finished = subprocess.run(
            [sys.executable, "-c", READER, str(root)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert finished.returncode == 0, finished.stderr
        printed = json.loads(finished.stdout)
        read = printed["facts"]
        document = store.load(ALICE).summaries.to_dict()
    assert printed["summaries"] == json.loads(json.dumps(document))
    for (group, name), text in sections.items():
        assert printed["summaries"][group][name]["summary"] == text
    assert set(read) == set(written)
    for fact_id, fact in written.items():
        items, heading = read[fact_id]
        order = [key for key, _ in items if key not in BODY]
        assert [dict(items), order, heading] == described(fact)
