"""The code examples in the docs that are marked runnable actually run, and hold."""

from __future__ import annotations

import re
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


def test_the_readme_examples_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's marked blocks tell one story: each continues with the previous one's names."""
    blocks = [match.group("code") for match in _RUNNABLE.finditer(README.read_text("utf-8"))]
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)  # the README's memory lives in ./memory
    namespace: dict[str, object] = {"__name__": "readme_example"}
    for number, code in enumerate(blocks, 1):
        exec(compile(code, f"README.md#{number}", "exec"), namespace)
    assert list((tmp_path / "memory").rglob("*.md"))  # it wrote a real store
