"""DeerMemMemoryTool and DeerMemAsyncMemoryTool through the SDK's entry point, ``tool.call(input)``,
and through the SDK's real tool runner against a scripted Messages API on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.lib.tools import ToolError

from deermem import Fact, Memory, MemoryConfig, UnsafeIdentifierError
from deermem.errors import FactRevisionConflict
from deermem.integrations.anthropic import DeerMemAsyncMemoryTool, DeerMemMemoryTool
from tests.wire_support import NOW, counting_ids, seed, stored_fact


def open_memory(root: Path, **settings: Any) -> Memory:
    config = MemoryConfig(**settings)
    return Memory.open(root, config, user="alice", clock=lambda: NOW, id_factory=counting_ids())


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    return open_memory(tmp_path / "store")


@pytest.fixture
def tool(memory: Memory) -> DeerMemMemoryTool:
    return DeerMemMemoryTool(memory)


def contents(memory: Memory, category: str | None = None) -> list[str]:
    return [f.content for f in memory.list_facts(category=category)]


def test_create_then_view_shows_one_fact_per_line_with_its_id(
    tool: DeerMemMemoryTool, memory: Memory
) -> None:
    result = tool.call(
        {
            "command": "create",
            "path": "/memories/preference.md",
            "file_text": "- Prefers uv over pip\n\nLikes dark mode\n",
        }
    )
    assert result == (
        "File created successfully at: /memories/preference.md\n"
        "memory: added fact_00000001, fact_00000002"
    )
    assert contents(memory, "preference") == ["Prefers uv over pip", "Likes dark mode"]
    assert tool.call({"command": "view", "path": "/memories/preference.md"}) == (
        "Here's the content of /memories/preference.md with line numbers:\n"
        "     1\t[fact_00000001] Prefers uv over pip\n"
        "     2\t[fact_00000002] Likes dark mode\n"
        "     3\t"
    )
    view = {"command": "view", "path": "/memories/preference.md", "view_range": [2, 2]}
    assert tool.call(view).splitlines()[1:] == ["     2\t[fact_00000002] Likes dark mode"]


def test_the_directory_lists_one_file_per_category(tool: DeerMemMemoryTool) -> None:
    assert tool.call({"command": "view", "path": "/memories"}) == (
        "Here're the files and directories up to 2 levels deep in /memories, "
        "excluding hidden items:\n0B\t/memories"
    )
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "Ship v1\n"})
    tool.call({"command": "create", "path": "/memories/Work Notes.md", "file_text": "Team A\n"})
    listing = tool.call({"command": "view", "path": "/memories/"}).splitlines()
    assert listing[1:] == [
        "47B\t/memories",
        "24B\t/memories/goal.md",
        "23B\t/memories/work notes.md",
    ]


def test_create_of_an_existing_file_is_refused_as_the_sdk_does(
    tool: DeerMemMemoryTool, memory: Memory
) -> None:
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "Ship v1\n"})
    with pytest.raises(ToolError, match=r"^File /memories/goal.md already exists$"):
        tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "Other\n"})
    assert contents(memory) == ["Ship v1"]


def test_str_replace_edits_deletes_and_adds_facts(tool: DeerMemMemoryTool, memory: Memory) -> None:
    tool.call(
        {"command": "create", "path": "/memories/preference.md", "file_text": "Uses pip\nTabs\n"}
    )
    edit = {
        "command": "str_replace",
        "path": "/memories/preference.md",
        "old_str": "Uses pip",
        "new_str": "Uses uv",
    }
    assert tool.call(edit) == "The memory file has been edited.\nmemory: changed fact_00000001"
    assert memory.get_fact("fact_00000001").content == "Uses uv"

    remove = {**edit, "old_str": "[fact_00000002] Tabs\n", "new_str": "Spaces, four\n"}
    result = tool.call(remove)
    receipt = memory.audit()[-1]
    assert receipt.fact_ids == ("fact_00000002",)
    assert result == (
        "The memory file has been edited.\nmemory: added fact_00000003; archived fact_00000002; "
        f"receipts {receipt.receipt_id}"
    )
    assert memory.get_archived("fact_00000002").fact.content == "Tabs"
    assert contents(memory) == ["Uses uv", "Spaces, four"]


@pytest.mark.parametrize(
    ("old", "message"),
    [
        ("Nowhere", r"old_str `Nowhere` did not appear verbatim in /memories/goal.md\.$"),
        ("Ship", r"Multiple occurrences of old_str `Ship` in lines: 1, 2\. Please ensure"),
    ],
    ids=["missing", "twice"],
)
def test_str_replace_needs_exactly_one_occurrence(
    tool: DeerMemMemoryTool, old: str, message: str
) -> None:
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "Ship v1\nShip v2"})
    with pytest.raises(ToolError, match=message):
        tool.call(
            {"command": "str_replace", "path": "/memories/goal.md", "old_str": old, "new_str": "x"}
        )


@pytest.mark.parametrize(
    ("new", "message"),
    [
        # an id the file does not hold (here: made up)
        ("[fact_ffffffff] Ship v2", r"line 1 names \[fact_ffffffff\], which is not a fact"),
        # the same id twice
        ("[fact_00000001] Ship v2\n[fact_00000001] Ship", r"names \[fact_00000001\] a second"),
        # an id left without text
        ("[fact_00000001]", r"to delete a fact, remove its whole line"),
    ],
    ids=["unknown-id", "id-twice", "id-without-text"],
)
def test_lines_the_memory_cannot_represent_are_refused_and_change_nothing(
    tool: DeerMemMemoryTool, memory: Memory, new: str, message: str
) -> None:
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "Ship v1\n"})
    before = memory.snapshot()
    edit = {
        "command": "str_replace",
        "path": "/memories/goal.md",
        "old_str": "[fact_00000001] Ship v1",
        "new_str": new,
    }
    with pytest.raises(ToolError, match=message):
        tool.call(edit)
    assert memory.snapshot() == before


def test_a_refused_line_is_named_without_its_text(tool: DeerMemMemoryTool, memory: Memory) -> None:
    # The tool's errors go back to the model, and often to a log (docs/privacy.md).
    secret = "my key ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5 \x07 end"
    with pytest.raises(ToolError) as caught:
        tool.call({"command": "create", "path": "/memories/keys.md", "file_text": secret})
    assert "ghp_" not in str(caught.value)
    assert "field 'content' has a text of" in str(caught.value)
    assert contents(memory) == []


def test_insert_adds_a_fact_at_a_line(tool: DeerMemMemoryTool, memory: Memory) -> None:
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "Ship v1\n"})
    insert = {
        "command": "insert",
        "path": "/memories/goal.md",
        "insert_line": 0,
        "insert_text": "Hire two people\n",
    }
    assert tool.call(insert) == (
        "The file /memories/goal.md has been edited.\nmemory: added fact_00000002"
    )
    assert contents(memory, "goal") == ["Ship v1", "Hire two people"]
    with pytest.raises(ToolError, match=r"`insert_line` parameter: 9\. .* range \[0, 2\]\.$"):
        tool.call({**insert, "insert_line": 9})


def test_an_add_names_what_the_capacity_gate_did(tmp_path: Path) -> None:
    memory = open_memory(tmp_path, max_facts=10)
    seed(
        memory,
        *(stored_fact(f"fact_old{n}", confidence=0.9, category="goal") for n in range(9)),
        stored_fact("fact_weak", "A weak guess", confidence=0.1, category="goal"),
    )
    tool = DeerMemMemoryTool(memory)
    insert = {"command": "insert", "path": "/memories/goal.md", "insert_line": 0}
    result = tool.call({**insert, "insert_text": "Ship v2 in May"})
    receipt = memory.audit()[-1]
    assert receipt.fact_ids == ("fact_weak",)
    assert result.endswith(
        "memory: added fact_00000001; the library was full: evicted to the archive fact_weak; "
        f"receipts {receipt.receipt_id}"
    )
    # a new fact weaker than all: the gate archives it at once, and the result says so
    result = tool.call({**insert, "insert_text": "x" * 3})
    assert "not kept (the capacity gate archived the new fact at once) fact_00000002" in result
    assert memory.get_archived("fact_00000002").fact.content == "xxx"


def test_delete_archives_a_file_and_refuses_the_directory(
    tool: DeerMemMemoryTool, memory: Memory
) -> None:
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "A\nB\n"})
    result = tool.call({"command": "delete", "path": "/memories/goal.md"})
    receipts = memory.audit()
    assert result == (
        "Successfully deleted /memories/goal.md\n"
        "memory: archived fact_00000001, fact_00000002; receipts "
        + ", ".join(str(r.receipt_id) for r in receipts)
    )
    assert {r.reason for r in receipts} == {"deleted"}
    assert memory.list_facts() == ()
    with pytest.raises(ToolError, match="Cannot delete the /memories directory itself"):
        tool.call({"command": "delete", "path": "/memories"})
    with pytest.raises(ToolError, match=r"The path /memories/goal\.md does not exist"):
        tool.call({"command": "delete", "path": "/memories/goal.md"})


def test_under_eviction_mode_delete_the_model_is_told_deleted_never_archived(
    tmp_path: Path,
) -> None:
    """Nothing leaves to the archive under eviction_mode: delete: a result that said "archived"
    would tell the model of facts it could bring back."""
    memory = open_memory(tmp_path / "store", eviction_mode="delete", max_facts=10)
    tool = DeerMemMemoryTool(memory)
    memory.create_fact("A weak guess", category="goal", confidence=0.1)
    path = "/memories/goal.md"
    lines = "".join(f"Sure fact number {n}\n" for n in range(9))  # the library is full
    tool.call({"command": "insert", "path": path, "insert_line": 1, "insert_text": lines})
    results = [
        # the weak guess makes room, then a fact as sure as the others is dropped at once
        tool.call({"command": "insert", "path": path, "insert_line": 0, "insert_text": "Fact 10"}),
        tool.call({"command": "insert", "path": path, "insert_line": 0, "insert_text": "Fact 11"}),
        tool.call({"command": "str_replace", "path": path, "old_str": "number 8\n", "new_str": ""}),
        tool.call({"command": "delete", "path": path}),
        tool.clear_all_memory(),
    ]
    assert memory.list_archived() == ()
    assert all("archive" not in result for result in results), results
    assert "the library was full: evicted and deleted fact_" in results[0]
    assert "not kept (the capacity gate deleted the new fact at once)" in results[1]
    assert "; deleted fact_" in results[2]
    assert "memory: deleted fact_" in results[3]


@pytest.mark.parametrize("command", ["create", "insert"])
def test_a_line_an_archived_fact_says_comes_back_in_the_file_it_was_written_to(
    tool: DeerMemMemoryTool, memory: Memory, command: str
) -> None:
    tool.call({"command": "create", "path": "/memories/work.md", "file_text": "Uses vim\n"})
    tool.call({"command": "delete", "path": "/memories/work.md"})
    if command == "insert":
        tool.call({"command": "create", "path": "/memories/tools.md", "file_text": "Uses git\n"})
        write = {"insert_line": 1, "insert_text": "Uses vim"}
    else:
        write = {"file_text": "Uses vim\n"}
    result = tool.call({"command": command, "path": "/memories/tools.md", **write})
    # relearned: the archived fact is back, with its id and history, in the file written to
    assert result.endswith("memory: relearned from the archive fact_00000001")
    assert "No file was created" not in result
    assert "Uses vim" in contents(memory, "tools")
    listing = tool.call({"command": "view", "path": "/memories"})
    assert "/memories/work.md" not in listing
    view = tool.call({"command": "view", "path": "/memories/tools.md"})
    assert "[fact_00000001] Uses vim" in view


def test_rename_changes_the_category_or_is_refused(tool: DeerMemMemoryTool, memory: Memory) -> None:
    tool.call({"command": "create", "path": "/memories/todo.md", "file_text": "Ship v1\n"})
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "Hire\n"})
    rename = {"command": "rename", "old_path": "/memories/todo.md", "new_path": "/memories/goal.md"}
    with pytest.raises(ToolError, match=r"The destination /memories/goal\.md already exists"):
        tool.call(rename)
    result = tool.call({**rename, "new_path": "/memories/decision.md"})
    assert result.endswith("memory: changed fact_00000001")
    assert memory.get_fact("fact_00000001").category == "decision"
    with pytest.raises(ToolError, match=r"The path /memories/todo\.md does not exist"):
        tool.call(rename)
    with pytest.raises(ToolError, match="Cannot rename the /memories directory"):
        tool.call({**rename, "old_path": "/memories"})


def test_clear_all_memory_archives_every_fact_with_receipts(
    tool: DeerMemMemoryTool, memory: Memory
) -> None:
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "A\nB\n"})
    result = tool.clear_all_memory()
    assert result.startswith("All memory cleared\nmemory: archived fact_00000001, fact_00000002")
    assert memory.list_facts() == ()
    assert len(memory.list_archived()) == 2
    assert memory.audit()[-1].reason == "deleted"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/memories-evil/x.md", "Path must start with /memories, got: /memories-evil/x.md"),
        ("memories/x.md", "Path must start with /memories, got: memories/x.md"),
        ("/etc/passwd", "Path must start with /memories, got: /etc/passwd"),
        ("/memories/../etc/passwd", "would escape /memories directory"),
        ("/memories/a/../../x.md", "would escape /memories directory"),
        ("/memories/./x.md", "would escape /memories directory"),
        ("/memories/a/b.md", "holds no directories"),
        ("/memories/x.txt", r"each file is /memories/<category>\.md"),
        ("/memories/.hidden.md", r"each file is /memories/<category>\.md"),
        ("/memories/.md", r"each file is /memories/<category>\.md"),
        ("/memories/a\nb.md", r"each file is /memories/<category>\.md"),
    ],
)
@pytest.mark.parametrize("command", ["view", "create", "delete"])
def test_paths_outside_the_category_files_are_refused(
    tool: DeerMemMemoryTool, memory: Memory, path: str, message: str, command: str
) -> None:
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "A\n"})
    before = memory.snapshot()
    arguments = {"command": command, "path": path, "file_text": "B\n"}
    with pytest.raises(ToolError, match=message):
        tool.call(arguments)
    with pytest.raises(ToolError, match=message):
        tool.call({"command": "rename", "old_path": "/memories/goal.md", "new_path": path})
    assert memory.snapshot() == before


def test_links_in_the_store_lead_nowhere(tmp_path: Path) -> None:
    """The files are made from the facts: no path reaches the disk, so no link is followed."""
    memory = open_memory(tmp_path / "store")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("[fact_00000009] a secret\n")
    (tmp_path / "store").mkdir(exist_ok=True)
    (tmp_path / "store" / "memories").symlink_to(outside)
    tool = DeerMemMemoryTool(memory)
    assert tool.call({"command": "view", "path": "/memories"}).endswith("0B\t/memories")
    with pytest.raises(ToolError, match="does not exist"):
        tool.call({"command": "view", "path": "/memories/secret.md"})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("view /memories", "the memory tool takes an object, got str"),
        ({"command": "bogus"}, "unknown command 'bogus'"),
        ({"path": "/memories"}, "unknown command None"),
        ({"command": "view"}, "view: path: Field required"),
        ({"command": "view", "path": 3}, "view: path: Input should be a valid string"),
        ({"command": "view", "path": "/memories", "view_range": [1]}, "view_range: expected"),
        (
            {"command": "insert", "path": "/memories/a.md", "insert_line": "x", "insert_text": ""},
            "insert: insert_line: Input should be a valid integer",
        ),
    ],
)
def test_bad_input_is_a_one_line_tool_error(
    tool: DeerMemMemoryTool, raw: object, message: str
) -> None:
    with pytest.raises(ToolError) as raised:
        tool.call(raw)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_refusal_of_the_memory_is_a_tool_error(
    tool: DeerMemMemoryTool, memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "A\nB\n"})

    def changed_meanwhile(fact_id: str, **_: object) -> Fact:
        raise FactRevisionConflict(fact_id, expected=1, actual=2)

    # Another writer changes a fact while the edit is written: no check can foresee it.
    monkeypatch.setattr(memory, "update_fact", changed_meanwhile)
    edit = {"command": "str_replace", "path": "/memories/goal.md", "old_str": "A\n["}
    with pytest.raises(ToolError) as raised:
        tool.call({**edit, "new_str": "A2\n["})
    assert "fact_00000001" in str(raised.value)
    assert str(raised.value).endswith("(done before it: nothing changed)")
    assert "\n" not in str(raised.value)


# --- a create without a line --------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n", " \n\n  "], ids=["empty", "newline", "blank"])
def test_create_without_a_line_is_refused_and_creating_with_one_works(
    tool: DeerMemMemoryTool, memory: Memory, text: str
) -> None:
    # A file is its category's active facts: an empty one cannot exist, so it is not reported.
    path = "/memories/notes.md"
    with pytest.raises(ToolError, match=r"^No file was created at /memories/notes\.md: the text"):
        tool.call({"command": "create", "path": path, "file_text": text})
    with pytest.raises(ToolError, match="does not exist"):
        tool.call({"command": "view", "path": path})
    assert tool.call({"command": "create", "path": path, "file_text": "Likes tea\n"}).startswith(
        "File created successfully at: /memories/notes.md\n"
    )
    insert = {"command": "insert", "path": path, "insert_line": 1, "insert_text": "Likes jazz"}
    assert tool.call(insert).endswith("memory: added fact_00000002")
    assert contents(memory, "notes") == ["Likes tea", "Likes jazz"]


def test_a_create_the_gate_keeps_no_line_of_says_no_file_was_created(tmp_path: Path) -> None:
    memory = open_memory(tmp_path, max_facts=10)
    seed(memory, *(stored_fact(f"fact_old{n}", confidence=0.9, category="goal") for n in range(10)))
    tool = DeerMemMemoryTool(memory)
    result = tool.call({"command": "create", "path": "/memories/idea.md", "file_text": "xxx\n"})
    assert result.startswith(
        "No file was created at /memories/idea.md: no line was kept\n"
        "memory: not kept (the capacity gate archived the new fact at once) fact_00000001"
    )
    with pytest.raises(ToolError, match="does not exist"):
        tool.call({"command": "view", "path": "/memories/idea.md"})


# --- every listed file is reachable ---------------------------------------------------------


def test_every_listed_file_can_be_viewed_edited_and_deleted(memory: Memory) -> None:
    # Categories a host writes through create_fact (or the LangGraph store): the tool's own
    # file names cannot hold "/" or start with ".", so the names encode them.
    for content, category in [
        ("Leads the billing migration", "work/projects"),
        ("Keeps a spare key under the mat", ".private"),
        ("Gives 100 percent", "100%"),
        ("A literal escape", "a%2Fb"),
    ]:
        memory.create_fact(content, category=category)
    tool = DeerMemMemoryTool(memory)
    listing = tool.call({"command": "view", "path": "/memories"}).splitlines()[2:]
    paths = [line.split("\t", 1)[1] for line in listing]
    assert paths == [
        "/memories/%2Eprivate.md",
        "/memories/100%25.md",
        "/memories/a%252fb.md",  # a file name is its category's key: lower case
        "/memories/work%2Fprojects.md",
    ]
    for path, fact_id in zip(
        paths, ["fact_00000002", "fact_00000003", "fact_00000004", "fact_00000001"], strict=True
    ):
        view = tool.call({"command": "view", "path": path}).splitlines()
        assert view[1].startswith(f"     1\t[{fact_id}] ")
        edit = {"command": "str_replace", "path": path, "old_str": "]", "new_str": "] Now:"}
        assert tool.call(edit).endswith(f"memory: changed {fact_id}")
        assert memory.get_fact(fact_id).content.startswith("Now:")
        assert tool.call({"command": "delete", "path": path}).startswith("Successfully deleted")
    assert memory.list_facts() == ()


def test_a_created_name_is_decoded_into_its_category(
    tool: DeerMemMemoryTool, memory: Memory
) -> None:
    path = "/memories/team%2Fplans.md"
    tool.call({"command": "create", "path": path, "file_text": "Ship v1\n"})
    assert memory.get_fact("fact_00000001").categoryExtension == "team/plans"
    assert tool.call({"command": "view", "path": "/memories"}).endswith(f"\t{path}")


# --- a refused line stores nothing --------------------------------------------------------------

SECRET_A = "token ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
SECRET_B = "token ghp_zZ9yX8wV7uT6sR5qP4oN3mL2kJ1iH0gF9eD8"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Lives in Oslo\nNotes: " + "x" * 4100, r"^line 2: .*content.*4,000"),
        ("Lives in Oslo\nlives in OSLO", r"^line 2 says what line 1 says"),
        (f"Lives in Oslo\n{SECRET_A}\n{SECRET_B}", r"^line 3 says what line 2 says"),
        ("Lives in Oslo\nShip V1", r"^line 2 says what fact_00000001 says"),
    ],
    ids=["too-long", "repeated", "equal-once-redacted", "in-another-file"],
)
def test_a_refused_create_stores_nothing_and_the_retry_works(
    tool: DeerMemMemoryTool, memory: Memory, text: str, message: str
) -> None:
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "Ship v1\n"})
    before = memory.snapshot()
    path = "/memories/profile.md"
    with pytest.raises(ToolError, match=message) as raised:
        tool.call({"command": "create", "path": path, "file_text": text})
    assert "ghp_" not in str(raised.value)
    assert memory.snapshot() == before
    retry = {"command": "create", "path": path, "file_text": "Lives in Oslo\nLikes tea\n"}
    assert tool.call(retry).startswith("File created successfully")
    assert contents(memory, "profile") == ["Lives in Oslo", "Likes tea"]


def test_a_refused_insert_changes_nothing(tool: DeerMemMemoryTool, memory: Memory) -> None:
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "Ship v1\nHire\n"})
    before = memory.snapshot()
    insert = {"command": "insert", "path": "/memories/goal.md", "insert_line": 0}
    with pytest.raises(ToolError, match=r"^line 2 says what fact_00000002 says"):
        tool.call({**insert, "insert_text": "Ship v2\nHIRE"})
    edit = {"command": "str_replace", "path": "/memories/goal.md", "old_str": "Ship v1"}
    with pytest.raises(ToolError, match=r"^line 1: .*content"):
        tool.call({**edit, "new_str": "y" * 4100 + "\nShip v3"})
    assert memory.snapshot() == before


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (  # removes line 2, and changes line 3 into line 1's text
            "[fact_00000002] Uses vim\n[fact_00000003] Likes coffee",
            "[fact_00000003] LIKES TEA",
            r"^line 2 says what fact_00000001 says",
        ),
        (  # changes a line into the text of another file's fact
            "[fact_00000003] Likes coffee",
            "[fact_00000003] ship V1",
            r"^line 3 says what fact_00000004 says",
        ),
        (  # changes two lines into one text
            "[fact_00000002] Uses vim\n[fact_00000003] Likes coffee",
            "[fact_00000002] Uses emacs\n[fact_00000003] uses EMACS",
            r"^line 3 says what fact_00000002 says",
        ),
        (  # swaps two texts: each change meets the other line's text before it changes
            "[fact_00000001] Likes tea\n[fact_00000002] Uses vim",
            "[fact_00000001] Uses vim\n[fact_00000002] Likes tea",
            r"^line 1 says what fact_00000002 says",
        ),
    ],
    ids=["a-line-that-stays", "another-file", "two-changed-lines", "swapped"],
)
def test_a_refused_edit_changes_nothing(
    tool: DeerMemMemoryTool, memory: Memory, old: str, new: str, message: str
) -> None:
    path = "/memories/preference.md"
    text = "Likes tea\nUses vim\nLikes coffee\n"
    tool.call({"command": "create", "path": path, "file_text": text})
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "Ship v1\n"})
    before = memory.snapshot()
    edit = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
    with pytest.raises(ToolError, match=message):
        tool.call(edit)
    assert memory.snapshot() == before
    # a change of a line's own case is no duplicate
    edit = {"command": "str_replace", "path": path, "old_str": "Uses vim", "new_str": "USES VIM"}
    assert tool.call(edit).endswith("memory: changed fact_00000002")


def test_a_category_the_memory_refuses_is_refused_before_any_line(
    tool: DeerMemMemoryTool, memory: Memory
) -> None:
    with pytest.raises(ToolError, match="category"):
        tool.call({"command": "create", "path": f"/memories/{'c' * 65}.md", "file_text": "A\nB"})
    assert memory.list_facts() == ()


def test_a_file_name_holding_a_secret_is_refused_naming_the_kind(tmp_path: Path) -> None:
    # prv-04: a category is redacted when stored, so a file named by a token would be stored
    # as [redacted: gitlab-token].md: the create seemed to fail (and was retried, piling up
    # facts), a second create was not refused, a rename reported a path that never existed.
    token = "glpat-ab12cd34ef56gh78ij90"
    memory = open_memory(tmp_path / "store")
    tool = DeerMemMemoryTool(memory)
    create = {"command": "create", "path": f"/memories/{token}.md", "file_text": "First\n"}
    for _ in range(2):
        with pytest.raises(ToolError, match=r"^No file was created: .*\(gitlab-token\)") as refused:
            tool.call(create)
        assert token not in str(refused.value)
    assert memory.list_facts() == ()
    tool.call({"command": "create", "path": "/memories/work.md", "file_text": "Work line\n"})
    rename = {"command": "rename", "old_path": "/memories/work.md", "new_path": create["path"]}
    with pytest.raises(ToolError, match=r"^Nothing was renamed: .*\(gitlab-token\)"):
        tool.call(rename)
    assert [(f.categoryExtension, f.content) for f in memory.list_facts()] == [
        ("work", "Work line")
    ]
    # without redaction the name is stored as given, so the file is what the model named
    plain = DeerMemMemoryTool(open_memory(tmp_path / "plain", redact_secrets=False))
    assert plain.call(create).startswith(f"File created successfully at: /memories/{token}.md")
    with pytest.raises(ToolError, match="already exists"):
        plain.call(create)


# --- brackets that are no fact id ------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "stored"),
    [
        ("[2026-01-05] Moved to Oslo", "[2026-01-05] Moved to Oslo"),
        ("[Important] Allergic to peanuts", "[Important] Allergic to peanuts"),
        ("- [x] Renewed passport", "[x] Renewed passport"),
        ("[fact_1234] Not deermem's id shape", "[fact_1234] Not deermem's id shape"),
    ],
)
def test_a_bracket_that_names_no_fact_of_the_file_is_text(
    tool: DeerMemMemoryTool, memory: Memory, line: str, stored: str
) -> None:
    path = "/memories/journal.md"
    result = tool.call({"command": "create", "path": path, "file_text": line + "\n"})
    assert result.endswith("memory: added fact_00000001")
    assert contents(memory, "journal") == [stored]
    view = tool.call({"command": "view", "path": path}).splitlines()
    assert view[1] == f"     1\t[fact_00000001] {stored}"
    # the line as view shows it names its fact: an edit, not a new fact
    edit = {"command": "str_replace", "path": path, "old_str": stored, "new_str": stored + "!"}
    assert tool.call(edit).endswith("memory: changed fact_00000001")
    assert contents(memory, "journal") == [stored + "!"]


def test_an_id_of_deermems_shape_from_another_file_is_refused(
    tool: DeerMemMemoryTool, memory: Memory
) -> None:
    tool.call({"command": "create", "path": "/memories/goal.md", "file_text": "Ship v1\n"})
    before = memory.snapshot()
    with pytest.raises(ToolError, match=r"line 1 names \[fact_00000001\], which is not a fact"):
        tool.call(
            {"command": "create", "path": "/memories/todo.md", "file_text": "[fact_00000001] X\n"}
        )
    assert memory.snapshot() == before


def test_an_unscoped_memory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsafeIdentifierError, match="scoped"):
        DeerMemMemoryTool(Memory.open_unscoped(tmp_path, MemoryConfig()))


def test_the_async_tool_runs_the_same_commands(memory: Memory) -> None:
    tool = DeerMemAsyncMemoryTool(memory)

    async def session() -> list[str]:
        create = {"command": "create", "path": "/memories/goal.md", "file_text": "Ship v1\n"}
        results = [await tool.call(create)]
        results.append(await tool.call({"command": "view", "path": "/memories/goal.md"}))
        with pytest.raises(ToolError, match="Path must start with /memories"):
            await tool.call({"command": "view", "path": "/memories-evil/x.md"})
        results.append(await tool.clear_all_memory())
        return results

    created, viewed, cleared = asyncio.run(session())
    assert created.endswith("memory: added fact_00000001")
    assert viewed.splitlines()[1] == "     1\t[fact_00000001] Ship v1"
    assert cleared.startswith("All memory cleared")


# --- the SDK's tool runner, over real HTTP --------------------------------------------------

TURNS: list[list[dict[str, Any]]] = [
    [
        {
            "type": "tool_use",
            "id": "tu_1",
            "name": "memory",
            "input": {"command": "create", "path": "/memories/preference.md", "file_text": "uv\n"},
        },
        {
            "type": "tool_use",
            "id": "tu_2",
            "name": "memory",
            "input": {"command": "view", "path": "/memories-evil/x.md"},
        },
    ],
    [{"type": "text", "text": "Done."}],
]


@pytest.fixture
def messages_api() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A Messages API on 127.0.0.1 answering TURNS in order; yields its URL and the bodies."""
    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append(body)
            content = TURNS[len(bodies) - 1]
            calls = any(block["type"] == "tool_use" for block in content)
            reply = {
                "id": f"msg_{len(bodies)}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": "tool_use" if calls else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", bodies
    finally:
        server.shutdown()
        server.server_close()


def test_the_sdk_tool_runner_drives_the_tool(
    messages_api: tuple[str, list[dict[str, Any]]], memory: Memory
) -> None:
    url, bodies = messages_api
    client = anthropic.Anthropic(api_key="test", base_url=url, max_retries=0)
    runner = client.beta.messages.tool_runner(
        model="claude-test",
        max_tokens=100,
        tools=[DeerMemMemoryTool(memory)],
        messages=[{"role": "user", "content": "Remember that I use uv."}],
    )
    final = runner.until_done()
    client.close()
    assert final.content[0].type == "text"
    assert bodies[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = bodies[1]["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in results] == ["tu_1", "tu_2"]
    assert results[0].get("is_error") in (None, False)
    assert results[1]["is_error"] is True
    assert "Path must start with /memories" in json.dumps(results[1]["content"])
    assert contents(memory, "preference") == ["uv"]
