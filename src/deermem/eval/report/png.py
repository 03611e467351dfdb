"""PNG charts through matplotlib, the optional ``eval`` extra.

matplotlib (with numpy, Pillow and fontTools) is far larger than the memory
library, so it is not a dependency of deermem: ``pip install 'deermem[eval]'``
adds it. Without it ``deermem eval report`` still writes the Markdown and says
how to get the charts; :func:`missing_chart_module` is how it finds out.

Every chart is drawn the same deterministic way: matplotlib's default style,
the fonts bundled with matplotlib, a fixed resolution, and no software or time
stamp in the file, so two renderings of the same numbers are the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "CHARTS_EXTRA",
    "POLICY_COLOURS",
    "chart_reference",
    "figure_png",
    "missing_chart_module",
]

CHARTS_EXTRA: Final = "pip install 'deermem[eval]'"
"""How to install what the charts need."""
POLICY_COLOURS: Final = {"confidence": "#7f7f7f", "hybrid-v1": "#1f6fb4"}
"""Each policy's colour, the same in every chart."""


def missing_chart_module() -> str | None:
    """The module the charts need but cannot import, or ``None`` when they can be drawn."""
    try:
        # The import figure_png needs; matplotlib, numpy and Pillow come with it.
        from matplotlib.backends import backend_agg  # noqa: F401
    except ModuleNotFoundError as error:
        return error.name or "matplotlib"
    return None


def figure_png(width: float, height: float, draw: Callable[[Figure], None]) -> bytes:
    """Draw a ``width`` × ``height`` inch figure with ``draw`` and return it as PNG bytes.

    Raises:
        ModuleNotFoundError: matplotlib is not installed (see :func:`missing_chart_module`).
    """
    import matplotlib.style  # the optional extra: imported only to draw
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.style.context("default"):
        figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
        FigureCanvasAgg(figure)
        draw(figure)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def chart_reference(description: str, file: str | None) -> str:
    """The Markdown line that shows a chart, or says how to get it when none was drawn."""
    if file is None:
        return f"*{description}: no chart; drawing it needs matplotlib (`{CHARTS_EXTRA}`).*"
    return f"![{description}]({file})"
