"""Result files: canonical JSON and atomic, no-overwrite writes.

Evaluation outputs must be byte-identical across runs and must never replace
earlier results. So every document is serialised one way (sorted keys,
Python float ``repr``, no ASCII escaping), every file appears whole or not at
all (written to a temporary file, synced, then hard-linked into place — a
link fails if the name exists, so even a race cannot overwrite), and a set of
files is refused as a whole if any of them is already there.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from deermem.eval.errors import ResultsExistError

__all__ = [
    "document_text",
    "ensure_absent",
    "jsonl_line",
    "replace_file",
    "utc_timestamp",
    "write_new_files",
]

# Errors of os.link that mean "this file system has no hard links", not "refused".
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV})


def jsonl_line(value: object) -> str:
    """One JSON Lines record: sorted keys, default separators, a newline."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True) + "\n"


def document_text(value: object) -> str:
    """A JSON document: indented by two, sorted keys, a trailing newline."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2) + "\n"


def utc_timestamp(moment: datetime | None = None) -> str:
    """Wall-clock provenance time: ISO 8601 UTC, microseconds always shown, ``Z``."""
    moment = (moment or datetime.now(UTC)).astimezone(UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def ensure_absent(paths: Sequence[Path]) -> None:
    """Refuse, naming all of them, if any of ``paths`` exists.

    Raises:
        ResultsExistError: one or more of the paths exist.
    """
    existing = [str(path) for path in paths if path.exists() or path.is_symlink()]
    if existing:
        raise ResultsExistError(existing)


def write_new_files(files: Sequence[tuple[Path, bytes]]) -> tuple[Path, ...]:
    """Write each file atomically, in order, refusing to replace anything.

    The whole set is checked first; then each file is written to a temporary
    name beside its target, synced, and hard-linked to its final name (an
    atomic, no-clobber step; a plain rename after the existence check where
    the file system has no hard links). If publishing fails half-way, the
    files this call already published are removed again, so the directories
    are left as they were. Parent directories are created.

    Returns:
        The paths written, in order.

    Raises:
        ResultsExistError: a target exists (before or during the write).
        OSError: the files cannot be written.
    """
    ensure_absent([path for path, _ in files])
    published: list[Path] = []
    try:
        for path, data in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            _publish(path, data)
            published.append(path)
    except BaseException:
        for path in published:
            with contextlib.suppress(OSError):
                path.unlink()
        raise
    return tuple(published)


def replace_file(path: Path, data: bytes) -> None:
    """Write ``path`` atomically, replacing whatever is there.

    For files a run owns and may redo (an answer called again on resume):
    written to a temporary name beside the target, synced, then renamed over
    it, so a reader sees the old file or the new one, never a part. Result
    files never go through here; they use :func:`write_new_files`.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = _write_temporary(path, data)
    try:
        temporary.replace(path)
    finally:
        temporary.unlink(missing_ok=True)


def _write_temporary(target: Path, data: bytes) -> Path:
    """Write ``data`` to a new, synced file beside ``target``; return its path.

    Beside the target, so that linking or renaming it into place stays on one
    file system; named ``.<target>.<random>.tmp`` so a leftover is recognisable.
    """
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    temporary = Path(name)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary


def _publish(target: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``target``, then link it into place."""
    temporary = _write_temporary(target, data)
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
