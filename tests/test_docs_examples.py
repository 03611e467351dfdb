"""The code examples in the docs that are marked runnable actually run, and hold."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
README = DOCS.parent / "README.md"
_RUNNABLE = re.compile(r"<!-- runnable[^>]*-->\n```python\n(?P<code>.*?)\n```", re.DOTALL)


def runnable_blocks() -> list[tuple[str, str]]:
    blocks = []
    for path in sorted(DOCS.glob("*.md")):
        for number, match in enumerate(_RUNNABLE.finditer(path.read_text("utf-8")), 1):
            blocks.append((f"{path.name}#{number}", match.group("code")))
    return blocks


BLOCKS = runnable_blocks()


def test_the_marked_examples_are_found() -> None:
    names = {name.split("#")[0] for name, _ in BLOCKS}
    assert {"context.md", "integrations.md", "llm.md", "mcp.md", "signals.md"} <= names


@pytest.mark.parametrize(("name", "code"), BLOCKS, ids=[name for name, _ in BLOCKS])
def test_example_runs(name: str, code: str) -> None:
    exec(compile(code, name, "exec"), {"__name__": f"docs_example_{name}"})


# The README's tour: its marked blocks, in order — Python run in one namespace, shell run by
# bash with the clone's .venv on PATH (what `source .venv/bin/activate` does), and a file a
# user saves ("runnable: save as NAME").
_TOUR = re.compile(
    r"<!-- runnable(?P<note>[^>]*)-->\n```(?P<lang>\w+)\n(?P<code>.*?)\n```",
    re.DOTALL,
)
ROOT = README.parent


def tour_blocks() -> list[tuple[str, str | None, str]]:
    """(language, file to save or None, code) of every marked README block, in order."""
    blocks = []
    for match in _TOUR.finditer(README.read_text("utf-8")):
        file = re.fullmatch(r":\s*save as (\S+)\s*", match.group("note"))
        blocks.append((match.group("lang"), file and file.group(1), match.group("code")))
    return blocks


def fresh_clone(destination: Path) -> Path:
    """The checkout's tracked files as they are now, with nothing a run left beside them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode("utf-8")
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def test_the_readme_tour_runs_top_to_bottom_in_a_fresh_clone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every marked block of the README, in order, as a new user runs them in a fresh clone:
    the Python blocks, the CLI blocks (bare `deermem`, as the Quick start sets up), the
    files it asks to save. A command that fails stops the tour with its output."""
    blocks = tour_blocks()
    languages = [language for language, _, _ in blocks]
    assert languages.count("python") >= 2
    assert languages.count("sh") >= 3
    clone = fresh_clone(tmp_path / "deermem")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(clone)  # the README's memory lives in ./memory
    for variable in [name for name in os.environ if name.startswith("DEERMEM_")]:
        monkeypatch.delenv(variable)
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("DEERMEM_")
    }
    environment |= {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}",
        "HOME": str(home),
    }
    namespace: dict[str, object] = {"__name__": "readme_example"}
    for number, (language, file, code) in enumerate(blocks, 1):
        name = f"README.md#{number} ({language})"
        if file is not None:
            (clone / file).write_text(code + "\n", "utf-8")
        elif language == "python":
            exec(compile(code, name, "exec"), namespace)
        elif language == "sh":
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", code],
                cwd=clone,
                env=environment,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
        else:
            raise AssertionError(f"{name}: a runnable block in an unknown language")
    assert list((clone / "memory").rglob("*.md"))  # it wrote a real store
    assert (clone / "alice.json").is_file()


def test_the_quick_start_puts_deermem_on_path_before_the_first_command() -> None:
    """A bare `deermem` is `command not found` until .venv is active: the README says how,
    and how to do without (`uv run`, `uv tool install`), before it uses one."""
    text = README.read_text("utf-8")
    first = re.search(r"^```sh\n(?:(?!```).*\n)*?deermem ", text, re.MULTILINE)
    assert first is not None
    assert "source .venv/bin/activate" in text[: first.end()]
    quick_start = text[text.index("## Quick start") : text.index("## A five-minute tour")]
    assert first.start() < len(text[: text.index("## A five-minute tour")])
    assert "uv run" in quick_start
    assert "uv tool install" in quick_start


def test_every_install_hint_works_from_a_checkout() -> None:
    """deermem is not on PyPI: no doc or message tells a user to `pip install 'deermem[...]'`
    (issue 24, point 5); the README says how to install an extra from the clone."""
    root = README.parent
    quick_start = README.read_text("utf-8").split("## A five-minute tour")[0]
    assert "uv sync --extra" in quick_start
    assert "pip install '.[" in quick_start
    offenders = [
        str(path.relative_to(root))
        for folder in ("docs", "src")
        for path in sorted((root / folder).rglob("*"))
        if path.suffix in {".md", ".py"} and _PYPI_INSTALL.search(path.read_text("utf-8"))
    ]
    assert offenders == []


# `pip install deermem[x]`, quoted either way, `uv pip install`, `uv add`: all from PyPI.
_PYPI_INSTALL = re.compile(r"""(?:pip install|uv add)\s+['"]?deermem\b""")


@pytest.mark.parametrize(
    "hint",
    [
        "pip install 'deermem[server]'",
        'pip install "deermem[langgraph]" langmem',  # docs/integrations.md had this one
        "pip install deermem[mcp]",
        "uv pip install deermem",
        "uv add 'deermem[anthropic]'",
    ],
)
def test_a_pypi_install_hint_is_caught(hint: str) -> None:
    assert _PYPI_INSTALL.search(hint)


@pytest.mark.parametrize(
    "hint",
    [
        "pip install '.[server]'",
        "pip install '/absolute/path/to/deermem[mcp]'",
        "uv add --group extensions /path/to/deermem",
        "uv sync --extra langgraph",
    ],
)
def test_an_install_from_the_clone_is_not_a_pypi_hint(hint: str) -> None:
    assert not _PYPI_INSTALL.search(hint)
