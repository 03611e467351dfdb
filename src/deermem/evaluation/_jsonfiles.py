"""Canonical JSON text and no-clobber atomic writes for evaluation results.

Published results are compared byte for byte, so there is exactly one way to
turn a document into text: ``json.dumps`` with sorted keys, ``ensure_ascii``
off (non-ASCII stays readable UTF-8), Python's shortest float ``repr``;
documents indented by two spaces and ended by one newline, JSONL lines with the
default separators and one newline each.

Results are never overwritten: a rerun that would replace a published figure
must go to a new directory. Each file is written to a temporary name in the
target directory, flushed to disk, and then published under its final name with
a hard link, which fails if the name exists — so even a concurrent writer cannot
be overwritten. Where hard links are not available the file is renamed into
place after the existence check.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from deermem._exceptions import ResultFilesExistError

__all__ = ["dump_document", "dump_line", "write_new_files"]

# Errors of os.link that mean "this file system has no hard links", not "refused".
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV})


def dump_document(document: object) -> str:
    """A JSON document: sorted keys, two-space indent, one trailing newline."""
    return json.dumps(document, ensure_ascii=False, sort_keys=True, indent=2) + "\n"


def dump_line(record: object) -> str:
    """One JSONL line: sorted keys, default separators, one trailing newline."""
    return json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"


def write_new_files(directory: Path, files: Mapping[str, str]) -> tuple[Path, ...]:
    """Write new UTF-8 files into ``directory``, refusing if any of them exists.

    Nothing is written unless none of the names exists. If publishing fails
    half-way, the files this call already published are removed again, so the
    directory is left as it was.

    Args:
        directory: where to write; created (with parents) when missing.
        files: file name → text, in the order to publish them.

    Returns:
        The paths written, in order.

    Raises:
        ResultFilesExistError: one or more of the files already exist.
    """
    targets = [directory / name for name in files]
    existing = [str(path) for path in targets if path.exists() or path.is_symlink()]
    if existing:
        raise ResultFilesExistError(existing)
    directory.mkdir(parents=True, exist_ok=True)
    published: list[Path] = []
    try:
        for target, text in zip(targets, files.values(), strict=True):
            _publish(target, text.encode("utf-8"))
            published.append(target)
    except BaseException:
        for path in published:
            with contextlib.suppress(OSError):
                path.unlink()
        raise
    return tuple(published)


def _publish(target: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``target``, then link it into place."""
    handle, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        try:
            os.link(temporary, target)
        except FileExistsError:
            raise ResultFilesExistError([str(target)]) from None
        except OSError as error:
            if error.errno not in _NO_HARD_LINKS:
                raise
            if target.exists():
                raise ResultFilesExistError([str(target)]) from None
            Path(temporary).replace(target)
    finally:
        Path(temporary).unlink(missing_ok=True)
