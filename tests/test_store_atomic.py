"""The one temporary-file writer: files as the umask makes them, names that fit."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deermem import Memory, MemoryConfig
from deermem.cli import main
from deermem.store.markdown.files import (
    atomic_write,
    is_temporary,
    read_file,
    read_file_status,
    read_if_exists,
    write_temporary,
)

NOW = datetime(2026, 8, 13, tzinfo=UTC)


@pytest.fixture
def umask() -> Iterator[None]:
    """Restore the process's umask after a test sets its own."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def modes(root: Path) -> dict[str, int]:
    return {
        str(path.relative_to(root)): stat.S_IMODE(path.stat().st_mode)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.mark.usefixtures("umask")
@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_every_file_of_a_store_is_created_as_the_umask_says(
    tmp_path: Path, mask: int, mode: int
) -> None:
    """As the original creates them: a directory shared with DeerFlow running as
    another user (same group, umask 002) stays readable and writable to it."""
    os.umask(mask)
    memory = Memory.open(tmp_path, MemoryConfig(max_facts=10), user="alice", clock=lambda: NOW)
    for number in range(11):  # the eleventh evicts one: archive entry and receipt too
        memory.create_fact(f"Fact number {number}.", confidence=0.5 + number / 100)
    written = {name: value for name, value in modes(tmp_path).items() if name.endswith(".md")}
    assert len(written) == 10
    assert {value for name, value in modes(tmp_path).items() if ".memory.lock" not in name} == {
        mode
    }
    assert any("archive" in name for name in modes(tmp_path))
    assert any("memory.json" in name for name in modes(tmp_path))


@pytest.mark.usefixtures("umask")
def test_a_store_the_command_line_makes_follows_the_umask_its_settings_file_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`deermem init`, `demo --root` and `migrate` wrote deermem.yaml 0600 whatever the umask:
    another account that may read the store (DeerFlow's) could not open it at all."""
    os.umask(0o002)
    made = tmp_path / "init"
    assert main(["--root", str(made), "init", "--config", str(write_cap(tmp_path))]) == 0
    assert main(["--root", str(made), "--user", "alice", "facts", "add", "Shared fact."]) == 0
    assert main(["--root", str(tmp_path / "demo"), "demo"]) == 0
    assert main(["migrate", "--from", str(made), "--to", str(tmp_path / "copy")]) == 0
    capsys.readouterr()
    for root in ("init", "demo", "copy"):
        written = modes(tmp_path / root)
        assert written["deermem.yaml"] == 0o664, root
        assert {value for name, value in written.items() if ".memory.lock" not in name} == {
            0o664
        }, root


@pytest.mark.usefixtures("umask")
def test_a_copied_settings_file_is_no_more_readable_than_its_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its owner may have kept a hand-written file to himself: `migrate` keeps it so."""
    os.umask(0o022)
    source = tmp_path / "source"
    assert main(["--root", str(source), "init", "--config", str(write_cap(tmp_path))]) == 0
    (source / "deermem.yaml").chmod(0o600)
    assert main(["migrate", "--from", str(source), "--to", str(tmp_path / "copy")]) == 0
    capsys.readouterr()
    assert stat.S_IMODE((tmp_path / "copy" / "deermem.yaml").stat().st_mode) == 0o600


def write_cap(directory: Path) -> Path:
    path = directory / "cap.yaml"
    path.write_text("max_facts: 10\n", "utf-8")
    return path


def test_a_temporary_file_is_never_an_existing_file_or_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name already taken — here by a link planted where the first draw lands —
    is never opened: the writer draws another."""
    draws = iter([b"\x00" * 8, b"\x01" * 8])
    monkeypatch.setattr(os, "urandom", lambda size: next(draws))
    target = tmp_path / "memory.json"
    decoy = tmp_path / "elsewhere"
    (tmp_path / ".memory.json.0000000000000000.tmp").symlink_to(decoy)
    temporary = write_temporary(target, b"content")
    assert temporary.name == ".memory.json.0101010101010101.tmp"
    assert temporary.read_bytes() == b"content"
    assert is_temporary(temporary.name)
    assert not decoy.exists()


def test_names_stay_within_255_bytes_for_the_longest_ids(tmp_path: Path) -> None:
    """A 250-character id: ``<id>.json`` is 255 bytes, its temporary name must shorten."""
    target = tmp_path / ("f" * 250 + ".json")
    atomic_write(target, b"{}")
    assert target.read_bytes() == b"{}"
    temporary = write_temporary(target, b"x")
    assert len(temporary.name.encode()) <= 255
    assert is_temporary(temporary.name)
    assert temporary.name.startswith(".fff")


@pytest.mark.usefixtures("umask")
def test_a_file_for_its_owner_only_says_so(tmp_path: Path) -> None:
    """The server's token file: created 0600 whatever the umask allows others."""
    os.umask(0o002)
    target = tmp_path / "tokens.json"
    atomic_write(target, b"{}", mode=0o600)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    atomic_write(tmp_path / "shared.json", b"{}")
    assert stat.S_IMODE((tmp_path / "shared.json").stat().st_mode) == 0o664


@settings(max_examples=40, deadline=None)
@given(
    size=st.sampled_from([0, 1, 4095, 65_535, 65_536, 65_537, 200_001]),
    seed=st.binary(min_size=1, max_size=64),
)
def test_a_store_file_is_read_whole_through_its_descriptor(
    tmp_path_factory: pytest.TempPathFactory, size: int, seed: bytes
) -> None:
    """Issue 23: reads go through the file descriptor (no buffered file object), in
    chunks: every byte of a file of any size comes back, with the status of that file."""
    path = tmp_path_factory.mktemp("read") / "file.json"
    data = (seed * (size // len(seed) + 1))[:size]
    path.write_bytes(data)
    assert read_file(path) == data
    assert read_if_exists(path) == data
    read, status = read_file_status(path)
    assert read == data
    assert (status.st_size, status.st_ino) == (size, path.stat().st_ino)
    assert read_if_exists(path.with_name("absent.json")) is None
    with pytest.raises(FileNotFoundError):
        read_file(path.with_name("absent.json"))


@settings(max_examples=40, deadline=None)
@given(
    size=st.sampled_from([0, 1, 4095, 65_536, 200_001]),
    most=st.sampled_from([None, 1, 7, 4096]),
    flush=st.booleans(),
)
def test_a_file_is_written_whole_through_its_descriptor(
    tmp_path_factory: pytest.TempPathFactory, size: int, most: int | None, flush: bool
) -> None:
    """Issue 23: a file is written straight to its descriptor (no buffered file
    object, which costs a stat, an ioctl and a seek), every byte of it, even when
    the system writes fewer bytes per call than asked."""
    directory = tmp_path_factory.mktemp("write")
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    real_write = os.write

    def short_write(fd: int, chunk: bytes | memoryview) -> int:
        return real_write(fd, chunk if most is None else chunk[:most])

    def refused(*args: object, **kwargs: object) -> object:
        raise AssertionError("a buffered file object was opened")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "write", short_write)
        patch.setattr(os, "fdopen", refused)
        temporary = write_temporary(directory / "file.json", data, flush=flush)
    assert temporary.read_bytes() == data
    assert [p.name for p in directory.iterdir()] == [temporary.name]


def test_a_write_that_fails_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int, chunk: bytes | memoryview) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError, match="No space left"):
        write_temporary(tmp_path / "file.json", b"{}")
    assert list(tmp_path.iterdir()) == []


_ADDS_A_FACT_LARGER_THAN_A_FILE_MAY_BE = """
import resource, signal, sys
from deermem.cli.app import main

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.RLIM_INFINITY))
sys.exit(main(["--root", sys.argv[1], "--user", "alice", "facts", "add", "x " * 1500]))
"""


def test_a_write_that_fails_names_the_file(tmp_path: Path) -> None:
    # A write or an fsync fails on a descriptor, which names no file: a full disk said
    # "error: [Errno 28] No space left on device", and not where.
    import subprocess
    import sys

    root = tmp_path / "store"
    Memory.open(root, MemoryConfig(), user="alice").create_fact("A first fact.")
    child = [sys.executable, "-c", _ADDS_A_FACT_LARGER_THAN_A_FILE_MAY_BE, str(root)]
    done = subprocess.run(child, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    fact_dir = root / "users" / "alice" / "agents" / "__default__" / "facts"
    said = done.stderr.splitlines()[-1]  # after the warning that the commit was rolled back
    assert said.startswith(f"error: {fact_dir}/"), done.stderr
    assert said.endswith(".md: File too large"), done.stderr
    assert not [path for path in root.rglob("*") if is_temporary(path.name)]
