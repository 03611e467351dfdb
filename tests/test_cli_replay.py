"""``deermem eval replay`` as a user runs it: byte-identical results, the files, refusals."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from deermem import memory as memory_module
from deermem.cli import main
from deermem.eval.replay import REPLAY_FILES as RESULT_FILES
from deermem.eval.replay import RESULTS_SCHEMA, load_params
from deermem.recall import search as search_module

Cli = Callable[..., tuple[int, str, str]]
BUNDLED = Path(__file__).parents[1] / "src/deermem/eval/replay-params.yaml"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    def invoke(*args: str) -> tuple[int, str, str]:
        code = main(["eval", "replay", *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """The bundled parameters with a smaller quick section (2 seeds, 1 user, 45 days)."""
    raw = yaml.safe_load(BUNDLED.read_text("utf-8"))
    raw["quick"] = {"seeds": 2, "users": 1, "days": 45}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw), "utf-8")
    return path


def test_the_same_parameters_give_the_same_bytes(cli: Cli, small: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for output in (first, second):
        code, out, err = cli("--params", str(small), "--quick", "--output-dir", str(output))
        assert code == 0, err
        assert "| cap | policy | retained at need |" in out
        assert f"results written to {output}" in err
    for name in RESULT_FILES:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert (first / "replay.png").read_bytes().startswith(b"\x89PNG")
    code, out, _ = cli("--params", str(small), "--quick", "--json")
    assert code == 0
    assert out.encode() == (first / "replay.json").read_bytes()


def test_the_results_do_not_depend_on_the_embedding_models(
    cli: Cli, small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run as installed (CI has the models), then as where they cannot load: the same bytes.
    as_installed, without = tmp_path / "as-installed", tmp_path / "without"
    code, _, err = cli("--params", str(small), "--quick", "--output-dir", str(as_installed))
    assert code == 0, err
    for module in (memory_module, search_module):
        monkeypatch.setattr(module, "embedder", lambda: None)
        monkeypatch.setattr(module, "loaded_embedder", lambda: None)
    code, _, err = cli("--params", str(small), "--quick", "--output-dir", str(without))
    assert code == 0, err
    for name in RESULT_FILES:
        assert (as_installed / name).read_bytes() == (without / name).read_bytes(), name


def test_the_results_document(cli: Cli, small: Path, tmp_path: Path) -> None:
    code, out, _ = cli("--params", str(small), "--quick", "--json")
    assert code == 0
    results = json.loads(out)
    assert results["schema"] == RESULTS_SCHEMA
    assert results["paramsSha256"] == load_params(small).sha256
    assert results["params"]["seeds"] == 2  # the quick section, as run
    assert [(c["cap"], c["policy"]) for c in results["cells"]] == [
        (cap, policy) for cap in (25, 50, 100) for policy in ("confidence", "hybrid-v1")
    ]
    for cell in results["cells"]:
        assert cell["needs"] > 0
        assert 0 <= cell["retained"] <= cell["needs"]
        assert set(cell["events"]) == {
            "relearned",
            "restored",
            "missed_recall",
            "confirmed",
            "recalled",
            "corrected",
        }
        assert (cell["shadow"] is not None) == (cell["policy"] == "confidence")
    for row in results["differences"]:
        for measure in ("retention", "regretRate"):
            interval = row[measure]
            assert interval["low"] <= interval["mean"] <= interval["high"]
    assert [r["seeds"] for r in results["traffic"] if r["cap"] == 25] == [2]
    assert len(results["perSeed"]) == 2 * 3 * 2
    assert "The user's" not in out  # no fact content in the results


def test_a_complete_set_is_never_overwritten(cli: Cli, small: Path, tmp_path: Path) -> None:
    output = tmp_path / "out"
    output.mkdir()
    (output / "replay.json").write_text("earlier results", "utf-8")  # the set's last file
    (output / "replay.md").write_text("earlier table", "utf-8")
    code, _, err = cli("--params", str(small), "--quick", "--output-dir", str(output))
    assert code == 1
    assert "refusing to overwrite" in err
    assert "replay.json" in err
    assert "replay.md" in err
    assert (output / "replay.json").read_text("utf-8") == "earlier results"
    assert (output / "replay.md").read_text("utf-8") == "earlier table"


def test_what_a_killed_write_left_is_replaced(
    cli: Cli, small: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A write killed before ``replay.json`` left the table (and perhaps a temporary file):
    the next run names it and writes the whole set, as every other set of results."""
    output = tmp_path / "out"
    output.mkdir()
    (output / "replay.md").write_text("a killed write's table", "utf-8")
    (output / ".replay.json.0123456789abcdef.tmp").write_text("{", "utf-8")
    code, out, err = cli("--params", str(small), "--quick", "--output-dir", str(output))
    assert code == 0, err
    assert "replacing what an interrupted write left" in caplog.text
    assert (output / "replay.md").read_text("utf-8") != "a killed write's table"
    assert json.loads((output / "replay.json").read_text("utf-8"))["schema"] == RESULTS_SCHEMA
    assert not (output / ".replay.json.0123456789abcdef.tmp").exists()
    assert "| cap | policy | retained at need |" in out


def test_a_bad_parameters_file_is_refused_before_anything_runs(cli: Cli, tmp_path: Path) -> None:
    raw = yaml.safe_load(BUNDLED.read_text("utf-8"))
    raw["caps"] = [5]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw), "utf-8")
    code, out, err = cli("--params", str(path), "--quick")
    assert code == 1
    assert "caps.0" in err
    assert str(path) in err
    assert out == ""
    assert "Traceback" not in err


def test_the_scratch_stores_go_to_memory_when_it_is_there(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--quick` took 53 s on a disk and 5 s on tmpfs: without --workdir the scratch stores
    go to a memory-backed directory when one exists (issue 24, point 13)."""
    from deermem.eval import replay

    memory = tmp_path / "shm"
    memory.mkdir()
    monkeypatch.setattr(replay, "MEMORY_DIRECTORIES", (tmp_path / "absent", memory))
    made: list[Path] = []
    mkdtemp = tempfile.mkdtemp

    def recording(prefix: str, dir: Path | None) -> str:
        made.append(Path(mkdtemp(prefix=prefix, dir=dir)))
        return str(made[-1])

    monkeypatch.setattr(tempfile, "mkdtemp", recording)
    params = (
        replay.load_params(small).params.quickened().model_copy(update={"seeds": 1, "caps": [25]})
    )
    runs = replay.replay_all(params)
    assert len(made) == len(runs) == 2
    assert all(path.parent == memory for path in made)
    assert list(memory.iterdir()) == []  # each scratch store is removed after its cell
    monkeypatch.setattr(replay, "MEMORY_DIRECTORIES", (tmp_path / "absent",))
    assert replay.scratch_directory(None) is None  # the system's temporary directory
    assert replay.scratch_directory(tmp_path) == tmp_path  # --workdir wins


def test_the_help_tells_the_truth_about_quick(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "replay", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "about a minute on a disk" in text
