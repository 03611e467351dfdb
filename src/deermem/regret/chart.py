"""The regret chart: each policy's evictions and regret over time, as a PNG.

Drawn with matplotlib, the optional ``eval`` extra: :func:`chart_unavailable`
says whether it can be drawn here and how to make it so. Like the
evaluation's charts it uses matplotlib's default style and bundled fonts and
writes no software or time stamp, so the same report draws the same bytes.
"""

from __future__ import annotations

import io
from datetime import date
from typing import TYPE_CHECKING, Final

from deermem.regret.report import PolicyRegret, RegretReport

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["CHART_EXTRA", "chart_unavailable", "render_regret_chart"]

CHART_EXTRA: Final = "pip install 'deermem[eval]'"
"""How to install what the charts need."""
_COLOURS: Final = {"confidence": "#7f7f7f", "hybrid-v1": "#1f6fb4"}


def chart_unavailable() -> str | None:
    """Why no chart can be drawn here (and how to fix it), or ``None`` when it can."""
    try:
        from matplotlib.backends import backend_agg  # noqa: F401
    except ModuleNotFoundError as error:
        return f"charts need {error.name or 'matplotlib'}: {CHART_EXTRA}"
    return None


def render_regret_chart(report: RegretReport) -> bytes:
    """Two panels over time, one line per policy: regret rate, and regret events.

    Raises:
        ModuleNotFoundError: matplotlib is not installed (see :func:`chart_unavailable`).
    """
    import matplotlib.style  # the optional extra, imported only to draw
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.style.context("default"):
        figure = Figure(figsize=(8.0, 5.2), dpi=100, layout="constrained")
        FigureCanvasAgg(figure)
        rate, events = figure.subplots(2, 1, sharex=True)
        days = sorted({point.date for policy in report.policies for point in policy.timeline})
        first = date.fromisoformat(days[0]).toordinal() if days else 0
        for policy in report.policies:
            _draw(rate, events, policy, first)
        if days:
            span = date.fromisoformat(days[-1]).toordinal() - first
            ticks = sorted({round(span * n / 4) for n in range(5)})
            labels = [date.fromordinal(first + tick).isoformat() for tick in ticks]
            events.set_xticks(ticks, labels, fontsize="small")
        rate.set_ylabel("regretted / evicted")
        rate.set_ylim(0.0, 1.0)
        events.set_ylabel("regret events (running total)")
        events.set_xlabel("day (UTC)")
        if days:
            rate.legend(loc="upper left", fontsize="small")
        window = f"since {report.since[:10]}" if report.since else "everything kept"
        title = f"Regret by policy ({window}, until {report.until[:10]})"
        figure.suptitle(title, fontsize="medium")
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _draw(rate: Axes, events: Axes, policy: PolicyRegret, first: int) -> None:
    points = policy.timeline
    if not points:
        return
    days = [date.fromisoformat(p.date).toordinal() - first for p in points]
    label = f"{policy.policy} ({policy.role})"
    colour = _COLOURS.get(policy.policy)
    line = "-" if policy.role == "active" else "--"
    marker = "o" if len(points) < 40 else ""
    rates = [p.regretted / p.evictions if p.evictions else 0.0 for p in points]
    for axis, values in ((rate, rates), (events, [float(p.events) for p in points])):
        axis.plot(
            days, values, label=label, color=colour, linestyle=line, marker=marker, markersize=3
        )
