"""The original project's protocol bundle, as the tests use it.

The config and the two manifests are fixture files (``tests/fixtures/pr4810``);
the answer prompt is rebuilt here from its documented structure, because its
wording belongs to the original project and deermem ships none of it. The
text below is the original's system line, quoted solely so that the rebuilt
file has the SHA-256 the original config pins.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from deermem.evaluation.protocol import ProtocolFiles

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


def original_prompt_text() -> str:
    """The original answer prompt: 294 bytes, LF line endings, one final newline."""
    system = (  # the original project's words (reference eval-harness-spec.md §2.4)
        "Answer using only the stored memory below. If the answer is not supported, output "
        "exactly INSUFFICIENT. For a YES/NO question, output only YES or NO. Otherwise give "
        "only the shortest direct answer."
    )
    return (
        f"SYSTEM:\n{system}\n\nUSER:\n{{{{CURRENT_DATE_SECTION}}}}STORED MEMORY:\n"
        "{{STORED_MEMORY}}\n\nQUESTION: {{QUESTION}}\n"
    )


def write_original_bundle(directory: Path) -> ProtocolFiles:
    """Lay the original bundle out as the original does: configs/, manifests/, prompts/."""
    shutil.copytree(FIXTURE_ROOT / "configs", directory / "configs")
    shutil.copytree(FIXTURE_ROOT / "manifests", directory / "manifests")
    (directory / "prompts").mkdir()
    (directory / "prompts" / "answer-v1.txt").write_bytes(original_prompt_text().encode())
    return ProtocolFiles(
        config=directory / "configs" / "pr4789-reproduction-v1.yaml",
        official_manifest=directory / "manifests" / "longmemeval-pr4789-v1.json",
        synthetic_manifest=directory / "manifests" / "synthetic-corrections-pr4789-v1.json",
    )
