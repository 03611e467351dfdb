"""Result files: written whole or not at all, never over an existing one, nothing left behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from deermem._exceptions import ResultsExistError
from deermem.evaluation import _io


def _names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def test_new_files_are_written_whole_private_and_without_leftovers(tmp_path: Path) -> None:
    files = [(tmp_path / "a.jsonl", b"one\n"), (tmp_path / "sub" / "b.json", b"{}\n")]
    assert _io.write_new_files(files) == (files[0][0], files[1][0])
    for path, data in files:
        assert path.read_bytes() == data
        if os.name == "posix":
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _names(tmp_path) == ["a.jsonl", "sub"]  # no .tmp left
    assert _names(tmp_path / "sub") == ["b.json"]


def test_an_existing_file_refuses_the_whole_set(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_bytes(b"earlier")
    with pytest.raises(ResultsExistError):
        _io.write_new_files([(tmp_path / "a.jsonl", b"x"), (tmp_path / "b.json", b"y")])
    assert _names(tmp_path) == ["b.json"]
    assert (tmp_path / "b.json").read_bytes() == b"earlier"


def test_a_failure_half_way_unpublishes_what_was_written(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_bytes(b"a file where a directory must go")
    with pytest.raises(FileExistsError):
        _io.write_new_files([(tmp_path / "a.jsonl", b"x"), (tmp_path / "blocker" / "b", b"y")])
    assert _names(tmp_path) == ["blocker"]


def test_a_taken_temporary_name_is_drawn_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    draws = iter([b"\x00" * 6, b"\x00" * 6, b"\x01" * 6])
    monkeypatch.setattr(os, "urandom", lambda _: next(draws))
    taken = tmp_path / f".a.json.{'00' * 6}.tmp"
    taken.write_bytes(b"someone else's")
    _io.write_new_files([(tmp_path / "a.json", b"mine")])
    assert (tmp_path / "a.json").read_bytes() == b"mine"
    assert taken.read_bytes() == b"someone else's"
    assert _names(tmp_path) == [".a.json.000000000000.tmp", "a.json"]


def test_replace_file_swaps_the_content_whole(tmp_path: Path) -> None:
    target = tmp_path / "answers" / "one.json"
    _io.replace_file(target, b"first")
    _io.replace_file(target, b"second")
    assert target.read_bytes() == b"second"
    assert _names(target.parent) == ["one.json"]
