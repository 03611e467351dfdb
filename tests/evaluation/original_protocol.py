"""The original project's protocol bundle, as the tests use it.

The config and the two manifests are fixture files (``tests/evaluation/fixtures/pr4810``;
the official manifest is stored as ``official-manifest.json`` and gets its original
name only when the bundle is laid out, so no file named like LongMemEval data is
tracked). The answer prompt is rebuilt at test time from its documented structure;
its one system line is the original project's wording, which deermem neither ships
nor copies: it is read from the reference description ``eval-harness-spec.md`` (§2.4)
in the directory named by ``DEERMEM_REFERENCE_DIR`` (:mod:`tests.reference_plugin`);
without it, the tests that need the original prompt are skipped.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from deermem.eval.protocol import ProtocolFiles
from tests.reference_plugin import reference_file

__all__ = [
    "FIXTURE_ROOT",
    "ORIGINAL_HASHES",
    "PUBLISHED_KEPT_IDS",
    "original_prompt_text",
    "write_original_bundle",
]

FIXTURE_ROOT = Path(__file__).parent / "fixtures" / "pr4810"
PUBLISHED_KEPT_IDS = FIXTURE_ROOT / "published_kept_fact_ids.json"
ORIGINAL_HASHES = {
    "config": "e0bcd1581be8457c614a4159b87304e54501d48a7e07990b02f1f6f8627fa026",
    "official_manifest": "7f9b26f3bfb7a19c75af53af77ac5ebaa02eeb05c7824c5b5c08be0d9e43db4b",
    "synthetic_manifest": "2f0c7f9bc05f87322bf3e2d8c33aeb9ec3bf27fb12772cda43915e4d75c2be1e",
    "answer_prompt": "2bd4f166219946ccff7ac86f52a053c6dbf8be6d27e178c398d6bf70cf8a7423",
}


# The line of §2.4 that quotes the system instruction between backticks.
_SYSTEM_LINE = re.compile(r"Exact text \(the test pins it\):\s*`([^`]+)`")


def original_prompt_text() -> str:
    """The original answer prompt: 294 bytes, LF line endings, one final newline.

    Skips the calling test when ``DEERMEM_REFERENCE_DIR`` is not set.
    """
    spec = reference_file("eval-harness-spec.md")
    found = _SYSTEM_LINE.search(spec.read_text(encoding="utf-8"))
    if found is None:
        raise AssertionError(f"no quoted system line in §2.4 of {spec}")
    system = found.group(1)
    return (
        f"SYSTEM:\n{system}\n\nUSER:\n{{{{CURRENT_DATE_SECTION}}}}STORED MEMORY:\n"
        "{{STORED_MEMORY}}\n\nQUESTION: {{QUESTION}}\n"
    )


def write_original_bundle(directory: Path) -> ProtocolFiles:
    """Lay the original bundle out as the original does: configs/, manifests/, prompts/."""
    shutil.copytree(FIXTURE_ROOT / "configs", directory / "configs")
    manifests = directory / "manifests"
    manifests.mkdir()
    shutil.copyfile(
        FIXTURE_ROOT / "manifests" / "official-manifest.json",
        manifests / "longmemeval-pr4789-v1.json",  # the original's own file name
    )
    shutil.copyfile(
        FIXTURE_ROOT / "manifests" / "synthetic-corrections-pr4789-v1.json",
        manifests / "synthetic-corrections-pr4789-v1.json",
    )
    (directory / "prompts").mkdir()
    (directory / "prompts" / "answer-v1.txt").write_bytes(original_prompt_text().encode())
    return ProtocolFiles(
        config=directory / "configs" / "pr4789-reproduction-v1.yaml",
        official_manifest=directory / "manifests" / "longmemeval-pr4789-v1.json",
        synthetic_manifest=directory / "manifests" / "synthetic-corrections-pr4789-v1.json",
    )
