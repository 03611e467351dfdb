"""Result files: written whole or not at all, never over an existing one, nothing left behind."""

from __future__ import annotations

import fcntl
import os
import stat
import threading
from pathlib import Path

import pytest

from deermem.eval import files as result_files
from deermem.eval.errors import ResultsExistError


def _names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def test_new_files_are_written_whole_private_and_without_leftovers(tmp_path: Path) -> None:
    files = [(tmp_path / "a.jsonl", b"one\n"), (tmp_path / "sub" / "b.json", b"{}\n")]
    assert result_files.write_new_files(files) == (files[0][0], files[1][0])
    for path, data in files:
        assert path.read_bytes() == data
        if os.name == "posix":
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _names(tmp_path) == ["a.jsonl", "sub"]  # no .tmp left
    assert _names(tmp_path / "sub") == ["b.json"]


def test_an_existing_file_refuses_the_whole_set(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_bytes(b"earlier")
    with pytest.raises(ResultsExistError):
        result_files.write_new_files([(tmp_path / "a.jsonl", b"x"), (tmp_path / "b.json", b"y")])
    assert _names(tmp_path) == ["b.json"]
    assert (tmp_path / "b.json").read_bytes() == b"earlier"


def test_what_an_interrupted_write_left_is_replaced_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A process killed while publishing: a.jsonl linked, b.json's temporary file
    # written but not linked, c.json (the last, the mark of a complete set) missing.
    (tmp_path / "a.jsonl").write_bytes(b"old")
    (tmp_path / ".b.json.0123456789abcdef.tmp").write_bytes(b"half")
    (tmp_path / ".other.json.0123456789abcdef.tmp").write_bytes(b"not this set's")
    files = [(tmp_path / "a.jsonl", b"x"), (tmp_path / "b.json", b"y"), (tmp_path / "c.json", b"z")]
    result_files.write_new_files(files)
    assert [path.read_bytes() for path, _ in files] == [b"x", b"y", b"z"]
    assert _names(tmp_path) == [".other.json.0123456789abcdef.tmp", "a.jsonl", "b.json", "c.json"]
    assert "replacing what an interrupted write left" in caplog.text
    assert f"{tmp_path / 'a.jsonl'}, {tmp_path / '.b.json.0123456789abcdef.tmp'}" in caplog.text


def test_a_write_under_way_is_not_taken_for_an_interrupted_one(tmp_path: Path) -> None:
    # Another writer holds the directory's lock, has published a.jsonl and not yet b.json.
    files = [(tmp_path / "a.jsonl", b"mine"), (tmp_path / "b.json", b"mine")]
    (tmp_path / "a.jsonl").write_bytes(b"theirs")
    fd = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    outcome: list[BaseException | None] = []

    def write() -> None:
        try:
            result_files.write_new_files(files)
            outcome.append(None)
        except ResultsExistError as error:
            outcome.append(error)

    writer = threading.Thread(target=write)
    writer.start()
    writer.join(0.3)
    assert writer.is_alive()  # waiting for the lock, having removed nothing
    assert (tmp_path / "a.jsonl").read_bytes() == b"theirs"
    (tmp_path / "b.json").write_bytes(b"theirs")  # the other writer completes its set
    os.close(fd)  # and lets go
    writer.join(10)
    assert isinstance(outcome[0], ResultsExistError)
    assert [path.read_bytes() for path, _ in files] == [b"theirs", b"theirs"]


def test_a_failure_half_way_unpublishes_what_was_written(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_bytes(b"a file where a directory must go")
    with pytest.raises(FileExistsError):
        result_files.write_new_files(
            [(tmp_path / "a.jsonl", b"x"), (tmp_path / "blocker" / "b", b"y")]
        )
    assert _names(tmp_path) == ["blocker"]


def test_replace_file_swaps_the_content_whole(tmp_path: Path) -> None:
    target = tmp_path / "answers" / "one.json"
    result_files.replace_file(target, b"first")
    result_files.replace_file(target, b"second")
    assert target.read_bytes() == b"second"
    assert _names(target.parent) == ["one.json"]
