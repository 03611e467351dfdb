"""Anthropic's client-side memory tool (``memory_20250818``) over a deermem :class:`Memory`.

The model sees a directory, ``/memories``, holding one file per category:
``/memories/<category>.md``. Each line of a file is one active fact and
carries its id, ``[fact_1a2b3c4d] The user prefers uv``; a fact written on
several lines is shown on one. A file exists while its category has an active
fact, so there is no empty file (a ``create`` without a line is refused). A
file's name is its category's key with ``%``, ``/``, control characters and a
leading ``.`` percent-encoded, so every listed file can be opened. Editing a
file edits the facts:

* a new line without an id is a new fact of the file's category, through the
  capacity gate (which may evict another fact, or the new one at once); a
  leading ``[…]`` is an id only when it names a fact of the file or has
  deermem's id shape, so ``[2026-01-05] …`` is text;
* a line whose text changes is an update of that fact (the id stays);
* a line that disappears is a deletion: the fact goes to the archive with a
  receipt;
* renaming a file moves its facts to another category; deleting a file
  archives its facts; :meth:`clear_all_memory` archives every fact.

Every result ends with a ``memory:`` line saying what deermem did (ids and
receipt ids only), so the model learns of an eviction when it happens. What the
tool cannot represent is refused with the SDK's :class:`ToolError` (the runner
sends it to the model as an error result): a path outside ``/memories``
(``/memories-evil/…`` included), ``..``, anything but a ``<category>.md`` file
directly in ``/memories``, a new file name holding a secret (it would be stored
redacted, under another name), a line naming an id of deermem's shape that is not
in the file, an id written twice, a line the memory would refuse (checked for
the whole text before anything is written, so a refusal changes nothing).
There are no real files, so no link can lead anywhere.
Commands the SDK's own tool refuses are refused with its wording (``create`` of
an existing file, ``str_replace`` of text found twice or not at all, …).

The two tool classes are shells over :class:`MemoryFiles`: the sync one runs it
directly, the async one in a worker thread (store I/O must not block the loop).
"""

from __future__ import annotations

import asyncio
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818Command,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)
from pydantic import TypeAdapter, ValidationError

from deermem.errors import DeerMemError
from deermem.memory import Memory
from deermem.model import RANDOM_FACT_ID_PATTERN, Fact, category_key, duplicate_key, redact
from deermem.results import FactPatch, NewFact, error_location, field_names
from deermem.store import EvictionReceipt

__all__ = ["ROOT", "DeerMemAsyncMemoryTool", "DeerMemMemoryTool", "MemoryFiles"]

ROOT: Final = "/memories"
"""The one directory the model sees."""

_SUFFIX: Final = ".md"
_COMMANDS: Final[Mapping[str, type[Any]]] = {
    "view": BetaMemoryTool20250818ViewCommand,
    "create": BetaMemoryTool20250818CreateCommand,
    "str_replace": BetaMemoryTool20250818StrReplaceCommand,
    "insert": BetaMemoryTool20250818InsertCommand,
    "delete": BetaMemoryTool20250818DeleteCommand,
    "rename": BetaMemoryTool20250818RenameCommand,
}
# A stripped line of a file: an optional list marker, then the line proper. The line proper may
# start as `view` shows a fact, "[<fact id>]" then a space or the end of the line; whether that
# bracket is an id or the start of the text is decided against the file (_read_lines).
_LINE: Final = re.compile(
    r"(?:[-*]\s+)?(?P<line>(?:\[(?P<id>[A-Za-z0-9_-]{1,250})\](?=\s|$))?(?P<text>.*))"
)
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
# What a file name may not hold as itself (percent-encoded instead, _name_of): "%" (so that
# decoding gives back exactly the label), "/" (there are no directories), control characters.
_ENCODED: Final = re.compile(r"[%/\x00-\x1f\x7f]")


@dataclass
class _Changes:
    """What one command did to the memory, for the ``memory:`` line of its result."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    not_kept: list[str] = field(default_factory=list)
    relearned: list[str] = field(default_factory=list)
    receipts: list[str] = field(default_factory=list)
    archiving: bool = True
    """Whether what leaves goes to the archive (``eviction_mode: archive``) or nowhere."""

    def take(self, receipts: Iterable[EvictionReceipt]) -> None:
        for receipt in receipts:
            if receipt.receipt_id is not None and receipt.receipt_id not in self.receipts:
                self.receipts.append(receipt.receipt_id)

    def line(self) -> str:
        # Under eviction_mode: delete nothing is restorable: the model is told so, never that
        # a fact it can bring back is in the archive.
        archived, evicted, not_kept = (
            ("archived", "evicted to the archive", "archived")
            if self.archiving
            else ("deleted", "evicted and deleted", "deleted")
        )
        parts = [
            f"{label} {', '.join(ids)}"
            for label, ids in (
                ("added", self.added),
                ("relearned from the archive", self.relearned),
                ("changed", self.changed),
                (archived, self.archived),
                (f"the library was full: {evicted}", self.evicted),
                (f"not kept (the capacity gate {not_kept} the new fact at once)", self.not_kept),
                ("receipts", self.receipts),
            )
            if ids
        ]
        return "memory: " + ("; ".join(parts) if parts else "nothing changed")


class MemoryFiles:
    """The memory as ``/memories/<category>.md`` files: every command, sync.

    Args:
        memory: a scoped memory (``Memory.open(root, user=...)``).
    """

    def __init__(self, memory: Memory) -> None:
        memory.scope  # noqa: B018 (an unscoped memory is refused here, not at the first call)
        self.memory = memory

    # --- dispatch -----------------------------------------------------------------

    def call(self, raw: object) -> str:
        """Validate a ``tool_use`` input and run its command; bad input is a :class:`ToolError`."""
        return self.execute(parse_command(raw))

    def execute(self, command: BetaMemoryTool20250818Command) -> str:
        """Run a typed command; every deermem refusal becomes a one-line :class:`ToolError`."""
        handlers: Mapping[str, Callable[[Any], str]] = {
            "view": self.view,
            "create": self.create,
            "str_replace": self.str_replace,
            "insert": self.insert,
            "delete": self.delete,
            "rename": self.rename,
        }
        try:
            return handlers[command.command](command)
        except DeerMemError as error:
            raise ToolError(_one_line(str(error))) from error

    # --- the commands ---------------------------------------------------------------

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        files = self._files()
        if _is_root(command.path):
            return _listing(command.path, files)
        key = _file_key(command.path)
        if key not in files:
            raise ToolError(_missing(command.path))
        lines = _numbered(_text(files[key]).split("\n"))
        view_range = command.view_range
        if view_range is not None and len(view_range) == 2:
            start = max(view_range[0], 1)
            end = len(lines) if view_range[1] == -1 else view_range[1]
            lines = lines[start - 1 : end]
        return "\n".join([f"Here's the content of {command.path} with line numbers:", *lines])

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        if _is_root(command.path):
            raise ToolError(f"File {command.path} already exists")
        key = _file_key(command.path)
        if key in self._files():
            raise ToolError(f"File {command.path} already exists")
        label = _label(command.path)
        self._check_name(label, refused="No file was created")
        if not command.file_text.strip():
            # A file is its category's active facts: without a line there is nothing to hold
            # it, so "created" would be untrue and the next command would find no file.
            raise ToolError(
                f"No file was created at {command.path}: the text holds no line. A memory "
                "file exists while it holds a line (each line is a fact): create it with "
                "its first line as file_text"
            )
        changes = self._apply(key, label, {}, command.file_text)
        if key not in self._files():
            # Every line was archived at once by the capacity gate: the memory line says so.
            return f"No file was created at {command.path}: no line was kept\n{changes.line()}"
        return f"File created successfully at: {command.path}\n{changes.line()}"

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        facts, text = self._file(command.path)
        found = text.count(command.old_str)
        if found == 0:
            raise ToolError(
                f"No replacement was performed, old_str `{command.old_str}` did not appear "
                f"verbatim in {command.path}."
            )
        if found > 1:
            lines = [
                str(text.count("\n", 0, match.start()) + 1)
                for match in re.finditer(re.escape(command.old_str), text)
            ]
            raise ToolError(
                f"No replacement was performed. Multiple occurrences of old_str "
                f"`{command.old_str}` in lines: {', '.join(lines)}. Please ensure it is unique"
            )
        new_text = text.replace(command.old_str, command.new_str)
        changes = self._apply(_file_key(command.path), _label(command.path), facts, new_text)
        return f"The memory file has been edited.\n{changes.line()}"

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        facts, text = self._file(command.path)
        lines = text.split("\n")[:-1]  # the text ends with a newline: no line after it
        if not 0 <= command.insert_line <= len(lines):
            raise ToolError(
                f"Invalid `insert_line` parameter: {command.insert_line}. "
                f"It should be within the range [0, {len(lines)}]."
            )
        lines.insert(command.insert_line, command.insert_text.rstrip("\n"))
        new_text = "\n".join(lines) + "\n"
        changes = self._apply(_file_key(command.path), _label(command.path), facts, new_text)
        return f"The file {command.path} has been edited.\n{changes.line()}"

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        if _is_root(command.path):
            raise ToolError(f"Cannot delete the {ROOT} directory itself")
        facts, _ = self._file(command.path)
        changes = self._changes()
        for fact in facts.values():
            self.memory.delete_fact(fact.id, expected_revision=fact.revision)
            changes.archived.append(fact.id)
        self._receipts_of(changes)
        return f"Successfully deleted {command.path}\n{changes.line()}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        if _is_root(command.old_path) or _is_root(command.new_path):
            raise ToolError(f"Cannot rename the {ROOT} directory itself")
        files = self._files()
        source, target = _file_key(command.old_path), _file_key(command.new_path)
        if source not in files:
            raise ToolError(f"The path {command.old_path} does not exist")
        if target in files:
            raise ToolError(f"The destination {command.new_path} already exists")
        self._check_name(_label(command.new_path), refused="Nothing was renamed")
        changes = self._changes()
        for fact in files[source]:
            self.memory.update_fact(
                fact.id, category=_label(command.new_path), expected_revision=fact.revision
            )
            changes.changed.append(fact.id)
        return f"Successfully renamed {command.old_path} to {command.new_path}\n{changes.line()}"

    def clear_all_memory(self) -> str:
        """Archive every fact of the scope, with receipts (for the application, not the model)."""
        changes = self._changes()
        changes.archived.extend(self.memory.clear())
        self._receipts_of(changes)
        return f"All memory cleared\n{changes.line()}"

    # --- reading and writing files ----------------------------------------------------

    def _files(self) -> dict[str, list[Fact]]:
        """Active facts by file key (their category, or an ``other`` fact's own label)."""
        files: dict[str, list[Fact]] = {}
        for fact in self.memory.list_facts():
            files.setdefault(category_key(_fact_label(fact)), []).append(fact)
        return files

    def _file(self, path: str) -> tuple[dict[str, Fact], str]:
        """The facts of an existing file by id, and its text."""
        facts = self._files().get(_file_key(path))
        if facts is None:
            raise ToolError(_missing(path))
        return {fact.id: fact for fact in facts}, _text(facts)

    def _apply(self, key: str, label: str, facts: Mapping[str, Fact], new_text: str) -> _Changes:
        """Make the file ``key`` say ``new_text``: removals, then edits, then additions.

        The whole text is checked before anything is written (:meth:`_check_writes`),
        so a refused line changes nothing and the model can send the text again,
        fixed. Only what no check can foresee (another writer changing a fact
        meanwhile) stops the writing part-way, and the error says what was done.
        """
        edits, additions = _read_lines(new_text, facts)
        self._check_writes(label, facts, edits, additions)
        changes = self._changes()
        try:
            for fact_id, fact in facts.items():
                if fact_id not in edits:
                    self.memory.delete_fact(fact_id, expected_revision=fact.revision)
                    changes.archived.append(fact_id)
            for fact_id, (_, text) in edits.items():
                if text != _one_line(facts[fact_id].content):
                    self.memory.update_fact(
                        fact_id, content=text, expected_revision=facts[fact_id].revision
                    )
                    changes.changed.append(fact_id)
            for _, text in additions:
                result = self.memory.create_fact(text, category=label)
                changes.evicted.extend(i for i in result.evicted if i != result.fact.id)
                changes.take(result.receipts)
                if result.fact_id is None:
                    changes.not_kept.append(result.fact.id)
                elif result.relearned is not None:
                    self._move_here(key, label, result.fact)
                    changes.relearned.append(result.relearned)
                else:
                    changes.added.append(result.fact_id)
        except DeerMemError as error:
            done = changes.line().removeprefix("memory: ")
            raise ToolError(_one_line(f"{error} (done before it: {done})")) from error
        if changes.archived:
            self._receipts_of(changes)
        return changes

    def _move_here(self, key: str, label: str, fact: Fact) -> None:
        """Put a relearned fact in the file whose line brought it back.

        A line that says what an archived fact says brings that fact back
        (relearned, with its history) in the category it was archived in: the
        line the model wrote to this file would show up in another one, a file
        it may have deleted. The line is this file's, so its fact is too.
        """
        if category_key(_fact_label(fact)) != key:
            self.memory.update_fact(fact.id, category=label, expected_revision=fact.revision)

    def _check_writes(
        self,
        label: str,
        facts: Mapping[str, Fact],
        edits: Mapping[str, tuple[int, str]],
        additions: Iterable[tuple[int, str]],
    ) -> None:
        """Refuse every line the memory would refuse while writing, before anything is written.

        The memory commits one fact per call, so a line it refused half-way would
        leave the lines before it stored (and a created file existing, which
        blocks the model's retry). The checks are the memory's own: the text
        rules of :class:`NewFact` and :class:`FactPatch`, and the duplicate rule
        (:func:`duplicate_key`) applied to the text as it will be stored, with
        its secrets redacted, in the order :meth:`_apply` writes: each changed
        line against the facts active when it is written (those that stay, the
        lines changed before it as changed, the others as they are), then each
        new line against all that and the new lines before it.
        """
        redacting = self.memory.config.redact_secrets

        def stored(text: str) -> str:
            return redact(text).text if redacting else text

        # Invariant: every text the memory holds when the write being checked runs, by
        # duplicate key, to who holds it (a fact id, or "line N" of this text); removed facts
        # are not in it (they are archived first).
        held: dict[str, str] = {
            duplicate_key(fact.content): fact.id
            for fact in self.memory.list_facts()
            if fact.id not in facts or fact.id in edits
        }
        for fact_id, (number, text) in edits.items():
            if text == _one_line(facts[fact_id].content):
                continue
            _check_line(number, FactPatch.checked, content=text)
            before, after = duplicate_key(facts[fact_id].content), duplicate_key(stored(text))
            if after == before:
                continue  # its own text, in another case or spacing: no duplicate
            if after in held:
                raise _said_before(number, held[after])
            if held.get(before) == fact_id:
                del held[before]
            held[after] = fact_id
        for number, text in additions:
            _check_line(number, NewFact.checked, content=text, category=label)
            key = duplicate_key(stored(text))
            if key in held:
                raise _said_before(number, held[key])
            held[key] = f"line {number}"

    def _check_name(self, label: str, *, refused: str) -> None:
        """Refuse a new file name the memory would refuse or store as other text.

        A file name is its facts' category, and a category is redacted like any
        text. A name holding a secret would be stored as ``[redacted: KIND]``:
        the file the model named would never exist, so its ``create`` would
        seem to fail (and be retried) and a ``rename`` would name a path that
        is not there. Refusing it is plainer than answering with another
        name; the refusal names the kind, never the name.
        """
        _check_category(label)
        if self.memory.config.redact_secrets:
            kinds = redact(label).kinds
            if kinds:
                raise ToolError(
                    f"{refused}: the file name holds a secret ({', '.join(kinds)}), and a "
                    "file name is stored as its facts' category, where no secret is kept. "
                    "Name the file without it"
                )

    def _changes(self) -> _Changes:
        return _Changes(archiving=self.memory.config.eviction_mode == "archive")

    def _receipts_of(self, changes: _Changes) -> None:
        """Add the receipts that name the archived facts (deletions return none)."""
        archived = set(changes.archived)
        changes.take(r for r in self.memory.audit() if archived.intersection(r.fact_ids))


class DeerMemMemoryTool(BetaAbstractMemoryTool):
    """The memory tool for ``client.beta.messages.tool_runner(tools=[...])`` (sync).

    Args:
        memory: a scoped memory: the one user this tool serves.
        cache_control: passed to the SDK (prompt caching of the tool definition).
    """

    def __init__(
        self, memory: Memory, *, cache_control: BetaCacheControlEphemeralParam | None = None
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.files = MemoryFiles(memory)

    def call(self, input: object) -> str:
        return self.files.call(input)

    def execute(self, command: BetaMemoryTool20250818Command) -> str:
        return self.files.execute(command)

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self.files.execute(command)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self.files.execute(command)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self.files.execute(command)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self.files.execute(command)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self.files.execute(command)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self.files.execute(command)

    def clear_all_memory(self) -> str:
        return self.files.clear_all_memory()


class DeerMemAsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """The memory tool for ``AsyncAnthropic().beta.messages.tool_runner`` (async).

    Each command runs in a worker thread: the store's I/O never blocks the loop.
    """

    def __init__(
        self, memory: Memory, *, cache_control: BetaCacheControlEphemeralParam | None = None
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.files = MemoryFiles(memory)

    async def call(self, input: object) -> str:
        return await asyncio.to_thread(self.files.call, input)

    async def execute(self, command: BetaMemoryTool20250818Command) -> str:
        return await asyncio.to_thread(self.files.execute, command)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self.execute(command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self.execute(command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self.execute(command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self.execute(command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self.execute(command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self.execute(command)

    async def clear_all_memory(self) -> str:
        return await asyncio.to_thread(self.files.clear_all_memory)


# --- lines ------------------------------------------------------------------------------


def _read_lines(
    new_text: str, facts: Mapping[str, Fact]
) -> tuple[dict[str, tuple[int, str]], list[tuple[int, str]]]:
    """The edits (fact id to line number and text) and additions (line number, text) of a text.

    A leading ``[…]`` is a fact id only when it names a fact of this file, as
    ``view`` shows it, or has the shape of the ids deermem makes
    (:data:`RANDOM_FACT_ID_PATTERN`): such an id that is not in the file is
    refused, since the model meant a fact (one of another file, or one made
    up). Any other bracket, ``[2026-01-05] …``, ``[Important] …``,
    ``- [x] …``, starts the text of a new fact, as in any notes file.
    """
    edits: dict[str, tuple[int, str]] = {}
    additions: list[tuple[int, str]] = []
    for number, raw in enumerate(new_text.split("\n"), 1):
        match = _LINE.fullmatch(raw.strip())
        if match is None or not raw.strip():
            continue  # blank lines separate, they say nothing
        fact_id: str | None = match["id"]
        if fact_id is not None and fact_id not in facts:
            if RANDOM_FACT_ID_PATTERN.fullmatch(fact_id) is not None:
                raise ToolError(
                    f"line {number} names [{fact_id}], which is not a fact of this file "
                    "(a new line carries no id: memory gives it one)"
                )
            fact_id = None
        if fact_id is None:
            additions.append((number, match["line"].strip()))
            continue
        text = match["text"].strip()
        if fact_id in edits:
            raise ToolError(f"line {number} names [{fact_id}] a second time")
        if not text:
            raise ToolError(
                f"line {number} keeps [{fact_id}] without text: to delete a fact, "
                "remove its whole line"
            )
        edits[fact_id] = (number, text)
    return edits, additions


def _check_line(number: int, check: Callable[..., object], **fields: object) -> None:
    """Run one of the memory's checks on line ``number``; a refusal names the line."""
    try:
        check(**fields)
    except DeerMemError as error:
        raise ToolError(_one_line(f"line {number}: {error}. Nothing was changed")) from error


def _said_before(number: int, holder: str) -> ToolError:
    """The refusal of line ``number``, which says what ``holder`` (a fact id, "line N") says."""
    return ToolError(
        f"line {number} says what {holder} says (compared ignoring case, secrets redacted): "
        "a fact is stored once. Nothing was changed"
    )


def _check_category(label: str) -> None:
    """The memory's rule for a category a tool gives (length, one line, no near miss of a
    core one), applied before a file is created or renamed so no fact is written first."""
    try:
        FactPatch.checked(category=label)
    except DeerMemError as error:
        raise ToolError(_one_line(str(error))) from error


# --- input and paths -------------------------------------------------------------------


def parse_command(raw: object) -> BetaMemoryTool20250818Command:
    """A ``tool_use`` input as its typed command (the SDK's ``call`` does not validate)."""
    if not isinstance(raw, Mapping):
        raise ToolError(f"the memory tool takes an object, got {type(raw).__name__}")
    name = raw.get("command")
    kind = _COMMANDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ToolError(f"unknown command {name!r}: expected one of {', '.join(_COMMANDS)}")
    try:
        command: BetaMemoryTool20250818Command = TypeAdapter(kind).validate_python(dict(raw))
    except ValidationError as error:
        first = error.errors()[0]
        where = error_location(first["loc"], field_names(kind)) or "input"
        raise ToolError(f"{name}: {where}: {first['msg']}") from None
    view_range = command.view_range if command.command == "view" else None
    if view_range is not None and len(view_range) != 2:
        raise ToolError("view: view_range: expected [first line, last line]")
    return command


def _is_root(path: str) -> bool:
    _check_inside(path)
    return path.rstrip("/") == ROOT


def _check_inside(path: str) -> None:
    """The SDK's two path refusals: outside ``/memories``, or escaping it."""
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise ToolError(f"Path must start with {ROOT}, got: {path}")
    if any(part in (".", "..") for part in path.split("/")):
        raise ToolError(f"Path {path} would escape {ROOT} directory")


def _file_name(path: str) -> str:
    """The category label of ``/memories/<name>.md`` (the name decoded); anything else is refused.

    The name is the label as :func:`_name_of` encodes it, so every file the
    listing shows leads back to its facts. The length and the other rules of a
    category are the memory's, checked where a label is written
    (:func:`_check_category`): a file that exists is always reachable.
    """
    _check_inside(path)
    name = path.removeprefix(ROOT + "/")
    if "/" in name.rstrip("/"):
        raise ToolError(
            f"{path}: {ROOT} holds no directories, only one <category>{_SUFFIX} file per category"
        )
    stem = name.removesuffix(_SUFFIX)
    refused = ToolError(
        f"{path}: each file is {ROOT}/<category>{_SUFFIX}: a name of one line that does not "
        f"start with '.'; in it %2F stands for '/', %2E for a leading '.', %25 for '%'"
    )
    if not name.endswith(_SUFFIX) or stem.startswith(".") or _CONTROL.search(stem):
        raise refused
    try:
        label = urllib.parse.unquote(stem, errors="strict")
    except UnicodeDecodeError:
        raise refused from None
    if not label.strip():
        raise refused
    return label


def _name_of(key: str) -> str:
    """The file name of a category (its key): what a name may not hold percent-encoded,
    a leading '.' too (a hidden file, which the listing's header says it leaves out).

    Invariant: ``category_key(_file_name(f"/memories/{_name_of(key)}.md")) == key``.
    """
    name = _ENCODED.sub(lambda found: _percent(found[0]), key)
    return _percent(".") + name[1:] if name.startswith(".") else name


def _percent(character: str) -> str:
    return "".join(f"%{byte:02X}" for byte in character.encode())


def _file_key(path: str) -> str:
    return category_key(_file_name(path))


def _label(path: str) -> str:
    return _file_name(path).strip()


def _fact_label(fact: Fact) -> str:
    return (
        fact.categoryExtension
        if fact.category == "other" and fact.categoryExtension
        else (fact.category)
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _text(facts: Iterable[Fact]) -> str:
    return "".join(f"[{fact.id}] {_one_line(fact.content)}\n" for fact in facts)


def _numbered(lines: list[str]) -> list[str]:
    return [f"{number:>6}\t{line}" for number, line in enumerate(lines, 1)]


def _missing(path: str) -> str:
    return f"The path {path} does not exist. Please provide a valid path."


def _listing(path: str, files: Mapping[str, list[Fact]]) -> str:
    sizes = {_name_of(key): len(_text(facts).encode()) for key, facts in files.items()}
    lines = [
        f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:",
        f"{_size(sum(sizes.values()))}\t{ROOT}",
    ]
    lines.extend(f"{_size(size)}\t{ROOT}/{name}{_SUFFIX}" for name, size in sorted(sizes.items()))
    return "\n".join(lines)


def _size(count: int) -> str:
    """Bytes as people read them: ``23B``, ``4K``, ``1.5K``, ``2M``."""
    value = float(count)
    for unit in ("B", "K", "M"):
        if value < 1024:
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
        value /= 1024
    return f"{value:.1f}G"
