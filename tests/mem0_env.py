"""The directory mem0's client packages may write to while the tests run.

mem0 reads ``MEM0_DIR`` (and ``MEM0_TELEMETRY``) when it is imported: left alone it writes
``~/.mem0`` and phones PostHog. A test module sets both from here before its ``from mem0
import ...``. One directory per test process, removed when the process ends, so a run leaves
nothing behind in the system's temporary directory.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile

MEM0_DIR = tempfile.mkdtemp(prefix="deermem-mem0-")
atexit.register(shutil.rmtree, MEM0_DIR, ignore_errors=True)
