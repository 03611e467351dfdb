"""Make this fixture with the original DeerMem's own storage code (never run by the tests).

The fixture is data the original wrote: ``store/`` is a user directory in
which the original's commit was interrupted — its fact files changed, its
``memory.json`` not yet — leaving its ``prepared`` journal and the backups in
``.recovery/``; ``expected.json`` is every file (but the lock) after the
original's own recovery of a copy, which is what deermem must produce.

To remake it, export the original's package (bytedance/deer-flow, commit
f1f4af99, ``backend/packages/harness/deerflow/agents/memory/backends/deermem/
deermem``) as ``orig_deermem`` into a directory, and run this file in an
environment with PyYAML and pydantic (not deermem's)::

    python make.py /path/to/dir-holding-orig_deermem tests/store_fixtures/original-interrupted
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

USER = "alice"
AGENT = "__default__"


def fact(number: int, content: str) -> dict[str, object]:
    return {
        "id": f"fact_{number:08x}",
        "content": content,
        "category": "preference",
        "confidence": round(0.5 + number / 40, 3),
        "source": "manual",
        "createdAt": f"2026-08-{number + 1:02d}T00:00:00Z",
    }


def files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text("utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".memory.lock"
    }


def main(original: Path, out: Path) -> None:
    sys.path.insert(0, str(original))
    from orig_deermem.config import DeerMemConfig  # type: ignore[import-not-found]
    from orig_deermem.core import storage  # type: ignore[import-not-found]

    store_root = out / "store"
    shutil.rmtree(store_root, ignore_errors=True)
    memory = storage.FileMemoryStorage(DeerMemConfig(storage_path=str(store_root), max_facts=10))
    scope = {"user_id": USER, "agent_name": AGENT}
    memory.apply_changes({"upserts": [fact(n, f"Stored fact {n}.") for n in range(10)]}, **scope)
    updated = memory.get_fact("fact_00000003", **scope)
    assert updated is not None
    updated["content"] = "Stored fact 3, edited by the interrupted commit."

    real_write = storage._atomic_write

    def fail_on_the_manifest(path: Path, raw: bytes) -> None:
        if path.name == "memory.json":
            raise OSError(28, "No space left on device (made up: the commit stops here)")
        real_write(path, raw)

    storage._atomic_write = fail_on_the_manifest
    try:
        memory.apply_changes(
            {
                "upserts": [fact(10, "Created by the interrupted commit."), updated],
                "deletes": ["fact_00000000"],
            },
            **scope,
        )
    except OSError:
        pass
    else:
        raise SystemExit("the commit was expected to stop")
    finally:
        storage._atomic_write = real_write
    user_dir = next((store_root / "users").iterdir())
    assert json.loads((user_dir / ".memory.journal.json").read_text())["state"] == "prepared"

    copy = out / "recovered-by-the-original"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(store_root, copy)
    recovering = storage.FileMemoryStorage(DeerMemConfig(storage_path=str(copy), max_facts=10))
    recovering.load(AGENT, user_id=USER)  # the original recovers here
    expected = {
        name: text
        for name, text in files(copy).items()
        if not name.startswith("users/alice/.recovery/")
    }
    shutil.rmtree(copy)
    (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    digest = hashlib.sha256(json.dumps(expected, sort_keys=True).encode()).hexdigest()[:12]
    print(f"wrote {out} ({len(expected)} files after recovery, {digest})")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
