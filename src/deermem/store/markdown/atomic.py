"""Durable file replacement: write a temporary file, fsync, rename, fsync the directory.

A reader sees either the old file or the new one, never a mix, and once a
function here returns, the change survives a power cut. Every new content
goes through :func:`write_temporary`, the one place the store writes file
contents: a ``.<name>.<random>.tmp`` file in the target's own directory
(a rename is atomic only within one file system), created exclusively with
the permissions the umask gives (usually 0644) — as the original DeerMem
creates its files, so a directory both share stays readable to each.
Temporary files are hidden from every listing the store makes. fsyncs run
one after another, in the caller's thread.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Final, Literal

from deermem.config import store_settings_path
from deermem.errors import StoreSettingsExistError

__all__ = [
    "FILE_MODE",
    "atomic_write",
    "fsync_path",
    "is_temporary",
    "make_directories",
    "remove_durably",
    "replace_files",
    "write_store_settings",
    "write_temporary",
]

_TMP_SUFFIX: Final = ".tmp"
# A file name's limit on common file systems, in bytes; a temporary name keeps
# to it by shortening the target's name, never the random part.
_MAX_NAME_BYTES: Final = 255
_RANDOM_HEX: Final = 16
_NAME_ATTEMPTS: Final = 100
# A new file, never an existing one (O_EXCL also refuses a symbolic link).
_CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC

FILE_MODE: Final = 0o666
"""The mode new files are created with, less the umask: readable and writable by
whom the umask allows, never executable — what ``open(path, "w")`` gives."""


def is_temporary(name: str) -> bool:
    """Whether a directory entry is a temporary file (ours, or the original DeerMem's)."""
    return name.startswith(".") and name.endswith(_TMP_SUFFIX)


def write_temporary(path: Path, data: bytes, *, flush: bool = True, mode: int = FILE_MODE) -> Path:
    """Write ``data`` to a new temporary file beside ``path``; return its path.

    The file is created exclusively (never an existing file or a symbolic
    link), with ``mode`` less the umask — by default as ``open(path, "wb")``
    would create ``path`` itself; a file only its owner may read passes
    ``0o600``. ``flush`` fsyncs the content before returning. On failure the
    temporary file is removed again.
    """
    for _ in range(_NAME_ATTEMPTS):
        temporary = path.parent / _temporary_name(path.name)
        try:
            fd = os.open(temporary, _CREATE_FLAGS, mode)
            break
        except FileExistsError:  # the name is taken: draw another
            continue
    else:
        raise FileExistsError(f"{path.parent}: no free temporary file name for {path.name}")
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            if flush:
                stream.flush()
                os.fsync(stream.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary


def _temporary_name(name: str) -> str:
    """``.<name>.<random>.tmp``, with ``name`` shortened to keep within 255 bytes."""
    room = _MAX_NAME_BYTES - len(f"..{'0' * _RANDOM_HEX}{_TMP_SUFFIX}")
    stem = name.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "surrogateescape")
    return f".{stem}.{os.urandom(_RANDOM_HEX // 2).hex()}{_TMP_SUFFIX}"


def fsync_path(path: Path) -> None:
    """fsync a file's content, or a directory's entries (creations, renames, removals)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directories(directory: Path) -> list[Path]:
    """Create ``directory`` and missing parents; return the parents whose entries changed.

    The returned directories need an fsync for the new entries to be durable.
    """
    missing: list[Path] = []
    current = directory
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for item in reversed(missing):
        try:
            item.mkdir()
        except FileExistsError:
            if not item.is_dir():
                raise
    return [item.parent for item in missing]


def atomic_write(path: Path, data: bytes, *, mode: int = FILE_MODE) -> None:
    """Replace ``path`` with ``data`` atomically and durably (a new file of ``mode``
    less the umask; see :func:`write_temporary`).

    On any failure the temporary file is removed and ``path`` is untouched.
    """
    replace_files([(path, data)], mode=mode)


def remove_durably(path: Path) -> bool:
    """Remove ``path`` if it exists and make the removal durable; return whether it existed."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_path(path.parent)
    return True


def replace_files(
    changes: Iterable[tuple[Path, bytes | None]], *, journaled: bool = False, mode: int = FILE_MODE
) -> None:
    """Replace (or, for ``None``, remove) each file atomically; all are durable on return.

    Each file is old or new after a crash, never a mix, but the set is not
    atomic as a whole: a commit that needs that runs this under its journal.
    Every new content is flushed before it is renamed into place — unless
    ``journaled``: then the caller's journal puts every file back after a
    crash, so the contents are renamed first and flushed with the
    directories at the end, as the commit protocol states.
    """
    written: list[Path] = []
    directories: set[Path] = set()
    for path, data in changes:
        if data is None:
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            directories.add(path.parent)
            continue
        directories.update(make_directories(path.parent))
        temporary = write_temporary(path, data, flush=not journaled, mode=mode)
        try:
            temporary.replace(path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        directories.add(path.parent)
        if journaled:
            written.append(path)
    for item in [*written, *sorted(directories)]:
        fsync_path(item)


def write_store_settings(
    root: str | os.PathLike[str], text: str, *, force: bool = False
) -> Literal["created", "unchanged", "replaced"]:
    """Write a store's settings file (:func:`deermem.config.render_store_settings`'s
    text), never silently replacing other settings.

    The file is replaced atomically and durably (:func:`atomic_write`), so a
    reader sees the old settings or the new ones; nothing else in the root is
    touched. The root directory is created if needed. The file is its
    owner's alone (mode 0600), as it always was.

    Raises:
        StoreSettingsExistError: the root already holds different settings
            and ``force`` is false; nothing is written.
    """
    path = store_settings_path(root)
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = None
    except (OSError, UnicodeDecodeError):
        current = ""  # unreadable: different by definition
    if current == text:
        return "unchanged"
    if current is not None and not force:
        raise StoreSettingsExistError(str(path))
    atomic_write(path, text.encode("utf-8"), mode=0o600)
    return "created" if current is None else "replaced"
