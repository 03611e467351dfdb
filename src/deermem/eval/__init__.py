"""The evaluation of the capacity policies (``deermem eval ...``): an application of the library.

The static evaluation rebuilds the pools of the original DeerMem evaluation
from the LongMemEval oracle file, runs them through the production capacity
gate and writes results anyone can check byte for byte; the replay runs months
of seeded synthetic traffic through a real :class:`~deermem.Memory`. The
evaluation sits beside the command line, above the library, and may use all
of it.

Its modules, bottom up, each with one job:

* :mod:`~deermem.eval.errors` — the evaluation's branch of the exception tree;
* :mod:`~deermem.eval.files` — canonical JSON, writes that never overwrite,
  the git state a run records, schema problems;
* :mod:`~deermem.eval.grading` — the frozen answer grader and the paired
  statistics;
* :mod:`~deermem.eval.protocol` — the protocol bundle (config, manifests,
  answer prompt), read strictly and cross-checked;
* :mod:`~deermem.eval.rows` — the published QA results: graded rows, the
  summary and statistics derived from them, the run marker's schema;
* :mod:`~deermem.eval.dataset` — the pinned dataset, the selection and the
  45 cases;
* :mod:`~deermem.eval.policy_run` — ``run-policy`` and the retention table;
* :mod:`~deermem.eval.qa` — ``run-qa`` and ``grade-qa``: tasks, stored
  answers, the run marker;
* :mod:`~deermem.eval.answerers` — who answers a run: an OpenAI-compatible
  endpoint, or the embedded model;
* :mod:`~deermem.eval.verify` — ``verify``: published results re-derived
  from their rows and compared byte for byte;
* :mod:`~deermem.eval.report` — ``report``: Markdown and charts for people;
* :mod:`~deermem.eval.replay` — ``replay``: the parameters, the workload, the
  driver over ``Memory`` and the results;
* :mod:`~deermem.eval.published` — published results shipped with deermem.

The commands are in :mod:`deermem.cli.eval`.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "CHARTS_EXTRA",
    "POLICY_COLOURS",
    "PROVIDER_LOCAL",
    "PROVIDER_OPENAI_COMPATIBLE",
    "figure_png",
    "missing_chart_module",
]

# The evaluation's light root: what the command line needs before it loads the
# evaluation (it does only when an eval command runs) — who may answer a QA run
# — and the deterministic charts, which deermem regret --chart draws too.

PROVIDER_OPENAI_COMPATIBLE: Final = "openai-compatible"
"""The endpoint a protocol config names (``qa.provider``, the only value it may take)."""
PROVIDER_LOCAL: Final = "local"
"""``run-qa --provider local``: the embedded model instead of the config's endpoint."""
CHARTS_EXTRA: Final = "uv sync --extra eval"
"""How to install what the charts need (matplotlib, the optional ``eval`` extra)."""


def missing_chart_module() -> str | None:
    """The module the charts need but cannot import, or ``None`` when they can be drawn."""
    # Found, not imported: matplotlib (numpy and Pillow come with it) loads only to draw.
    for name in ("matplotlib", "numpy", "PIL"):
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except ModuleNotFoundError:
            return name
    return None


# Every chart is drawn the same deterministic way: matplotlib's default style,
# the fonts bundled with matplotlib, a fixed resolution, and no software or
# time stamp in the file, so two renderings of the same numbers are the same
# bytes. matplotlib (with numpy, Pillow and fontTools) is far larger than the
# memory library, so it is not a dependency: the ``eval`` extra adds it.

POLICY_COLOURS: Final = {"confidence": "#7f7f7f", "hybrid-v1": "#1f6fb4"}
"""Each policy's colour, the same in every chart."""


def figure_png(width: float, height: float, draw: Callable[[Figure], None]) -> bytes:
    """Draw a ``width`` × ``height`` inch figure with ``draw`` and return it as PNG bytes.

    Raises:
        ModuleNotFoundError: matplotlib is not installed (see :func:`missing_chart_module`).
    """
    # The optional extra, imported only to draw. A PNG is rendered by Agg whatever
    # canvas the figure starts with, so none is named here.
    from matplotlib import figure, style

    with style.context("default"):
        drawing = figure.Figure(figsize=(width, height), dpi=100, layout="constrained")
        draw(drawing)
        buffer = io.BytesIO()
        drawing.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
