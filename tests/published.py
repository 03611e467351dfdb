"""Where the original project's published QA results are, and what they hold.

They ship inside the package (``deermem.eval.published``), so every
checkout and every installation has them; the tests read that copy. The
hashes below are the ones the original project published (reference
eval-harness-spec §7), pinned here independently of the package's own copy of
them, so a changed file or a changed pin both fail.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from deermem.eval.published import DEFAULT_PUBLISHED, PUBLISHED

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
PUBLISHED_RESULTS = PUBLISHED[DEFAULT_PUBLISHED].directory

# SHA-256 of each published file (reference eval-harness-spec §7).
PUBLISHED_SHA256 = {
    "qa.rows.jsonl": "d14dcd1e57bbba393b552d61eec30a530c1157c145947d3a48f615d9c8d6fc20",
    "qa.stats.json": "5e14d7d8eabd988411af157a3f30e0adfdc67444c632c4387b25b34b139ea05d",
    "qa.summary.json": "a581861ae1233dd4a86878fa1aa61f861b1b54a416f7ac0047a8d2d30deab999",
    "qa_run.json": "ab487c2fd05dec6c9f0fcd38e0a52fc1249bac27a9e798d0625dd5eea6b041c6",
}
PROTOCOL_ID = "deermem-hybrid-v1-pr4789-reproduction-v1"


def published_results() -> Path:
    """The published results folder shipped with the package."""
    return PUBLISHED_RESULTS


def published_rows() -> list[dict[str, object]]:
    """The 90 published rows, parsed, in file order."""
    text = (published_results() / "qa.rows.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
