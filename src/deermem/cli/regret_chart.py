"""The regret chart: each policy's regret rate and regret events over time, as a PNG.

Drawn like the evaluation's charts (:mod:`deermem.eval`:
matplotlib, the optional ``eval`` extra; the default style, the bundled fonts,
no software or time stamp), so the same report draws the same bytes.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING

from deermem.eval import POLICY_COLOURS, figure_png
from deermem.library.regret import PolicyRegret, RegretReport

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["render_regret_chart"]


def render_regret_chart(report: RegretReport) -> bytes:
    """Two panels over time, one line per policy and role: regret rate, and regret events.

    Raises:
        ModuleNotFoundError: matplotlib is not installed
            (see :func:`~deermem.eval.missing_chart_module`).
    """

    def draw(figure: Figure) -> None:
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
            rate.legend(loc="upper left", fontsize="small")
        rate.set_ylabel("regretted / evicted")
        rate.set_ylim(0.0, 1.0)
        events.set_ylabel("regret events (running total)")
        events.set_xlabel("day (UTC)")
        window = f"since {report.since[:10]}" if report.since else "everything kept"
        figure.suptitle(
            f"Regret by policy ({window}, until {report.until[:10]})", fontsize="medium"
        )

    return figure_png(8.0, 5.2, draw)


def _draw(rate: Axes, events: Axes, policy: PolicyRegret, first: int) -> None:
    points = policy.timeline
    if not points:
        return
    days = [date.fromisoformat(p.date).toordinal() - first for p in points]
    label = f"{policy.policy} ({policy.role})"
    colour = POLICY_COLOURS.get(policy.policy)
    line = "-" if policy.role == "active" else "--"
    marker = "o" if len(points) < 40 else ""
    rates = [p.regretted / p.evictions if p.evictions else 0.0 for p in points]
    for axis, values in ((rate, rates), (events, [float(p.events) for p in points])):
        axis.plot(
            days, values, label=label, color=colour, linestyle=line, marker=marker, markersize=3
        )
