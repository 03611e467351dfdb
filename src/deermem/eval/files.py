"""The evaluation's files: canonical JSON, writes that never overwrite, provenance, schemas.

Evaluation outputs must be byte-identical across runs and must never replace
earlier results. So every document is serialised one way (sorted keys,
Python float ``repr``, no ASCII escaping but of a lone surrogate, which UTF-8
cannot hold), every file appears whole or not at
all (written to a temporary file by the store's one writer, synced, then
hard-linked into place — a link fails if the name exists, so even a race
cannot overwrite), and a set of files is refused as a whole if any of them is
already there.

Every run record (``run.json``, ``qa_run.json``) names the commit it was
produced by (:func:`git_state`), so a published figure can be traced to its
code; outside a git checkout (deermem installed from a wheel) it is ``null``.

The files the evaluation reads back (stored answers, graded rows, the run
marker) are checked against their schemas; a problem is a
:class:`FieldProblem`, and a found value is described by
:func:`describe_value` without repeating text that might be private. The
patterns of the identifiers those files may hold are defined here once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TypeAlias

from deermem.eval.errors import ResultsExistError
from deermem.store.markdown.files import fsync_path, is_temporary_of, write_temporary

__all__ = []

IDENTIFIER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
"""A case, scenario, question type or fact id: plain, short, no room for a sentence."""
IDENTIFIER_RULE: Final = "[A-Za-z0-9_.-], at most 128 characters"
"""What :data:`IDENTIFIER` admits, as an error message says it."""
ROW_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,255}")
"""A row id (``<case_id>__<policy>``), which also names its stored answer's file."""
MODEL_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,199}")
"""What a model name may look like (``deepseek-v4-flash``, ``org/model:tag``)."""
SHA256: Final = re.compile(r"[0-9a-f]{64}")
"""A SHA-256 in lowercase hex."""

# Result files are the run's own: only its owner may read them until published.
_RESULT_FILE_MODE: Final = 0o600
# Errors of os.link that mean "this file system has no hard links", not "refused".
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV})
_GIT_TIMEOUT_SECONDS: Final = 10.0
PACKAGE_DIRECTORY: Final = Path(__file__).resolve().parent.parent

logger = logging.getLogger("deermem.eval")

ObjectPairsHook: TypeAlias = Callable[[list[tuple[str, object]]], object]


# --- canonical JSON -------------------------------------------------------------------------------


class InvalidJsonError(ValueError):
    """A text that is not a JSON document the evaluation can read, said in one line.

    Attributes:
        reason: what is wrong (never the text itself), e.g. ``Expecting value
            at line 3 column 1``.
        line: the 1-based line, when the parser knows it.
    """

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


def parse_json(text: str, *, object_pairs_hook: ObjectPairsHook | None = None) -> object:
    """Read one JSON document of the evaluation's files; every way it fails is an InvalidJsonError.

    ``json.loads`` fails in more ways than :class:`json.JSONDecodeError`: an
    integer of more digits than Python converts (``sys.get_int_max_str_digits``,
    4,300) is a plain ``ValueError``, and deep nesting a ``RecursionError``.
    Files from elsewhere (published results, manifests, markers) may hold
    either, so each reader of them comes here and reports one line naming its
    file, never a traceback. An exception the hook raises that is not a
    ``ValueError`` passes through.
    """
    try:
        return json.loads(text, object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as error:
        reason = f"{error.msg} at line {error.lineno} column {error.colno}"
        raise InvalidJsonError(reason, error.lineno) from None
    except RecursionError:
        raise InvalidJsonError("nested too deeply to read") from None
    except ValueError:
        # The only other ValueError of json.loads on text: an integer too long to convert.
        raise InvalidJsonError(
            f"a number of more than {sys.get_int_max_str_digits()} digits"
        ) from None


def jsonl_line(value: object) -> str:
    """One JSON Lines record: sorted keys, default separators, a newline."""
    return _encodable(json.dumps(value, ensure_ascii=False, sort_keys=True)) + "\n"


def document_text(value: object) -> str:
    """A JSON document: indented by two, sorted keys, a trailing newline."""
    return _encodable(json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)) + "\n"


def _encodable(json_text: str) -> str:
    """``json_text`` with every lone surrogate written as its JSON escape (``\\ud83d``).

    A lone surrogate, half of an emoji a server cut off at its token limit, is
    valid in a JSON string but has no UTF-8 form: escaped, the document can be
    written, and it reads back as the same value. Every other character stays
    as it is, so the canonical text of other documents does not change.
    """
    return json_text.encode("utf-8", "backslashreplace").decode("utf-8")


def utc_timestamp(moment: datetime | None = None) -> str:
    """Wall-clock provenance time: ISO 8601 UTC, microseconds always shown, ``Z``."""
    moment = (moment or datetime.now(UTC)).astimezone(UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


# --- writes that never overwrite ------------------------------------------------------------------


def ensure_absent(paths: Sequence[Path]) -> None:
    """Refuse, naming all of them, if any of ``paths`` exists.

    Raises:
        ResultsExistError: one or more of the paths exist.
    """
    existing = [str(path) for path in paths if path.exists() or path.is_symlink()]
    if existing:
        raise ResultsExistError(existing)


def ensure_new_set(paths: Sequence[Path]) -> None:
    """Refuse a set of result files that is already complete: its last file exists.

    The last file of a set is written last (:func:`write_new_files`): without
    it, files of the set are what an interrupted write left, which the next
    write replaces, so they do not block it.

    Raises:
        ResultsExistError: the last file exists; every file of the set that
            exists is named.
    """
    if paths[-1].exists() or paths[-1].is_symlink():
        ensure_absent(paths)


def interrupted_set(paths: Sequence[Path]) -> list[Path]:
    """The files of a set an interrupted write left: those present while its last is missing."""
    if paths[-1].exists() or paths[-1].is_symlink():
        return []
    return [path for path in paths[:-1] if path.exists() or path.is_symlink()]


def write_new_files(files: Sequence[tuple[Path, bytes]]) -> tuple[Path, ...]:
    """Publish a set of result files, in order; never replace a complete set.

    Each file is written to a temporary name beside its target, synced, and
    hard-linked to its final name (an atomic, no-clobber step; a plain rename
    after the existence check where the file system has no hard links). The
    last file marks the set complete: it is published only once the others
    are on disk (their directories are synced first), so whatever kills the
    process (SIGKILL, the OOM killer, a power cut) leaves either a complete
    set or one without its last file. Such leftovers, and the temporary files
    of the set's names, are removed (and named in a warning on the
    ``deermem.eval`` logger) before the set is written again. Writers hold a
    lock on the set's directories while they publish, so a write still under
    way is never taken for an interrupted one. If publishing fails half-way
    in a process that survives, the files it published are removed again.
    Parent directories are created.

    Returns:
        The paths written, in order.

    Raises:
        ResultsExistError: the set's last file exists (before or during the write).
        OSError: the files cannot be written.
    """
    paths = [path for path, _ in files]
    ensure_new_set(paths)
    directories = sorted(dict.fromkeys(path.parent for path in paths))
    with contextlib.ExitStack() as held:
        for directory in directories:  # sorted: two writers take the locks in one order
            directory.mkdir(parents=True, exist_ok=True)
            held.enter_context(_publishing(directory))
        ensure_new_set(paths)  # again: another writer may have finished meanwhile
        _remove_leftovers(paths)
        published: list[Path] = []
        try:
            for path, data in files:
                if path == paths[-1]:
                    for directory in directories:  # the others are durable before the mark
                        fsync_path(directory)
                _publish(path, data)
                published.append(path)
        except BaseException:
            for path in published:
                with contextlib.suppress(OSError):
                    path.unlink()
            raise
        for directory in directories:
            fsync_path(directory)
    return tuple(published)


@contextlib.contextmanager
def _publishing(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``directory`` (released by the kernel if the process dies)."""
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _remove_leftovers(paths: Sequence[Path]) -> None:
    """Remove what an interrupted write of this set left: its files, its temporary files."""
    temporaries = [
        entry
        for directory in sorted(dict.fromkeys(path.parent for path in paths))
        for entry in sorted(directory.iterdir())
        if any(
            path.parent == directory and is_temporary_of(entry.name, path.name) for path in paths
        )
    ]
    leftovers = [*interrupted_set(paths), *temporaries]
    if not leftovers:
        return
    logger.warning("replacing what an interrupted write left: %s", ", ".join(map(str, leftovers)))
    for path in leftovers:
        path.unlink(missing_ok=True)
    for directory in dict.fromkeys(path.parent for path in leftovers):
        fsync_path(directory)


def replace_file(path: Path, data: bytes) -> None:
    """Write ``path`` atomically, replacing whatever is there.

    For files a run owns and may redo (an answer called again on resume):
    written to a temporary name beside the target, synced, then renamed over
    it, so a reader sees the old file or the new one, never a part. Result
    files never go through here; they use :func:`write_new_files`.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = write_temporary(path, data, mode=_RESULT_FILE_MODE)
    try:
        temporary.replace(path)
    finally:
        temporary.unlink(missing_ok=True)


def _publish(target: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``target``, then link it into place."""
    temporary = write_temporary(target, data, mode=_RESULT_FILE_MODE)
    try:
        try:
            os.link(temporary, target)
        except FileExistsError:
            raise ResultsExistError([str(target)]) from None
        except OSError as error:
            if error.errno not in _NO_HARD_LINKS:
                raise
            if target.exists():
                raise ResultsExistError([str(target)]) from None
            temporary.replace(target)
    finally:
        temporary.unlink(missing_ok=True)


# --- provenance -----------------------------------------------------------------------------------


def git_state(directory: Path | None = None) -> dict[str, object] | None:
    """The git state of ``directory`` (default: the deermem package).

    Returns:
        ``{"head": <commit>, "dirty": <bool>}``, or ``None`` when git is not
        installed, the directory is not inside a git checkout, the checkout
        tracks no file under it (deermem installed into a virtual environment
        that happens to live inside another repository), or git does not
        answer within ten seconds. ``dirty`` is true when ``git status``
        lists anything, untracked files included.
    """
    where = str(directory or PACKAGE_DIRECTORY)
    if _git(["-C", where, "ls-files", "--error-unmatch", "--", "."]) is None:
        return None
    # --no-optional-locks: a status must not take the index lock of the
    # user's checkout, which a git killed on timeout would leave behind.
    status = _git(["--no-optional-locks", "-C", where, "status", "--porcelain=v2", "--branch"])
    if status is None:
        return None
    head: str | None = None
    dirty = False
    for line in status.splitlines():
        if line.startswith("# branch.oid "):
            head = line.removeprefix("# branch.oid ").strip()
        elif line and not line.startswith("#"):
            dirty = True
    if head is None or head == "(initial)":
        return None
    return {"dirty": dirty, "head": head}


def _git(arguments: list[str]) -> str | None:
    """What ``git ARGUMENTS`` prints, if it runs and exits with status 0; else ``None``."""
    try:
        completed = subprocess.run(
            ["git", *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=_GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):  # git is not installed, or hangs
        return None
    if completed.returncode != 0:
        return None
    return completed.stdout.decode("utf-8", "replace")


# --- schema problems ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One way a record breaks its schema.

    Attributes:
        field: the key (``"grade_rule"``, ``"(keys)"``, ``"policy"``).
        expected: what the schema asks for.
        actual: what was found, described without echoing suspect text.
        row: the ``row_id`` (or ``case <id>``) the problem belongs to, when known.
        line: the line of the file it was found on, when it has one.
    """

    field: str
    expected: str
    actual: str
    row: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.row}: " if self.row else ""
        return f"{where}{self.field}: expected {self.expected}, got {self.actual}"


def describe_value(value: object, *, reveal: bool = True) -> str:
    """Describe a found value for a message; with ``reveal=False`` give only its shape.

    Values that might be private text (an unexpected key, a malformed
    identifier) are described by type and length, so that an error report never
    republishes what the check is there to keep out.
    """
    if not reveal:
        if isinstance(value, str):
            return f"a string of {len(value)} characters"
        return f"a JSON {_json_type(value)}"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


Rule = tuple[Callable[[object], bool], str]
"""A field's rule in a flat record: whether a value keeps it, and what it expects."""


def record_problems(
    data: Mapping[str, object],
    rules: Mapping[str, Rule],
    *,
    record: str,
    shown: Callable[[str, object], str],
) -> list[FieldProblem]:
    """Every way ``data`` breaks a flat record's schema (its keys are those of ``rules``).

    Missing keys are one problem; each unknown key is one, its value described
    by shape only; then each field that breaks its rule, its value as
    ``shown(key, value)`` describes it.
    """
    problems: list[FieldProblem] = []
    missing = [key for key in rules if key not in data]
    if missing:
        problems.append(
            FieldProblem("(keys)", f"every key of {record}", "missing " + ", ".join(missing))
        )
    for key in sorted(set(data) - set(rules)):
        problems.append(
            FieldProblem(
                key_label(key),
                f"no such key ({record} has only its {len(rules)} keys)",
                describe_value(data[key], reveal=False),
            )
        )
    for key, (valid, expected) in rules.items():
        if key in data and not valid(data[key]):
            problems.append(FieldProblem(key, expected, shown(key, data[key])))
    return problems


def key_label(key: str) -> str:
    """An unexpected key, quoted if it looks like a key and shortened otherwise."""
    return repr(key) if IDENTIFIER.fullmatch(key) else f"(a key of {len(key)} characters)"


def is_count(minimum: int) -> Callable[[object], bool]:
    """A whole number (not a flag) of at least ``minimum``."""
    return lambda value: type(value) is int and value >= minimum


def matching(pattern: re.Pattern[str]) -> Callable[[object], bool]:
    """A string the whole of which ``pattern`` matches."""
    return lambda value: isinstance(value, str) and pattern.fullmatch(value) is not None


def clean_usage(usage: Mapping[str, object]) -> dict[str, int]:
    """The token counts a file may publish: non-negative whole numbers under plain names."""
    return {
        key: value
        for key, value in sorted(usage.items())
        if IDENTIFIER.fullmatch(key) and type(value) is int and value >= 0
    }


def is_usage(value: object) -> bool:
    """Token counts holding nothing :func:`clean_usage` would drop."""
    return isinstance(value, dict) and clean_usage(value) == value
