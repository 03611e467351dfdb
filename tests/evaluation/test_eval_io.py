"""Result files: written whole or not at all, never over an existing one, nothing left behind."""

from __future__ import annotations

import os
import stat
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
