"""The regret chart of the inspector, drawn by the server as SVG (no matplotlib).

Two panels over the days of a :class:`~deermem.library.regret.RegretReport`:
each policy's regret rate (regretted / evicted), and the running total of
regret events by kind under the active policy. Pure: the same report gives
the same bytes. Presentation attributes only (no ``style``), so the page's
Content-Security-Policy needs no inline styles.
"""

from __future__ import annotations

from datetime import date
from typing import Final
from xml.sax.saxutils import escape, quoteattr

from deermem.library.regret import RegretReport
from deermem.store.records import REGRET_KINDS

__all__ = ["regret_svg"]

_WIDTH: Final = 640
_PANEL: Final = 150
_LEFT: Final = 48
_RIGHT: Final = 150
_TOP: Final = 24
_GAP: Final = 44
# Distinguishable in colour and in dash, so a reader who cannot tell the colours apart
# tells the lines apart (the table beside the chart holds every number anyway).
_STYLES: Final = (
    ("#1f77b4", ""),
    ("#d62728", "6 3"),
    ("#2ca02c", "2 2"),
    ("#9467bd", "8 3 2 3"),
    ("#ff7f0e", "4 4"),
    ("#8c564b", "1 3"),
)


def regret_svg(report: RegretReport) -> str:
    """The chart as one ``<svg>`` element, titled for screen readers."""
    days = sorted({point.date for policy in report.policies for point in policy.timeline})
    first = date.fromisoformat(days[0]).toordinal() if days else 0
    span = max(1, date.fromisoformat(days[-1]).toordinal() - first) if days else 1
    active = next((p for p in report.policies if p.role == "active"), None)
    most = max(
        (max(point.kinds.values(), default=0) for point in active.timeline) if active else (),
        default=0,
    )
    height = _TOP + 2 * _PANEL + _GAP + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_WIDTH} {height}" '
        f'width="{_WIDTH}" height="{height}" role="img" aria-labelledby="regret-chart-title">',
        '<title id="regret-chart-title">Regret rate per policy, and regret events by kind '
        "(running totals) under the active policy, by day (UTC)</title>",
    ]
    top = _TOP
    bottom = _TOP + _PANEL + _GAP
    parts += _axes(top, "regret rate", 1.0)
    parts += _axes(bottom, "events (running total)", float(max(most, 1)))
    for index, policy in enumerate(report.policies):
        colour, dash = _STYLES[index % len(_STYLES)]
        points = [
            (_x(point.date, first, span), point.regretted / point.evictions)
            for point in policy.timeline
            if point.evictions
        ]
        parts += _line(points, top, 1.0, colour, dash)
        parts.append(_legend(index, top, colour, dash, f"{policy.policy} ({policy.role})"))
    if active is not None:
        for index, kind in enumerate(REGRET_KINDS):
            colour, dash = _STYLES[index % len(_STYLES)]
            points = [
                (_x(point.date, first, span), float(point.kinds.get(kind, 0)))
                for point in active.timeline
            ]
            parts += _line(points, bottom, float(max(most, 1)), colour, dash)
            parts.append(_legend(index, bottom, colour, dash, kind))
    if days:
        for label, anchor, x in ((days[0], "start", _LEFT), (days[-1], "end", _WIDTH - _RIGHT)):
            parts.append(
                f'<text x="{x}" y="{bottom + _PANEL + 16}" font-size="11" '
                f'text-anchor="{anchor}">{escape(label)}</text>'
            )
    else:
        parts.append(
            f'<text x="{_LEFT + 8}" y="{top + _PANEL // 2}" font-size="12">'
            "No evictions or regret events yet.</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _x(day: str, first: int, span: int) -> float:
    offset = date.fromisoformat(day).toordinal() - first
    return _LEFT + (_WIDTH - _LEFT - _RIGHT) * offset / span


def _y(value: float, top: int, scale: float) -> float:
    return top + _PANEL - _PANEL * min(value, scale) / scale


def _axes(top: int, label: str, scale: float) -> list[str]:
    right = _WIDTH - _RIGHT
    top_label = "1" if scale == 1.0 else f"{scale:g}"
    return [
        f'<text x="{_LEFT}" y="{top - 8}" font-size="12">{escape(label)}</text>',
        f'<line x1="{_LEFT}" y1="{top + _PANEL}" x2="{right}" y2="{top + _PANEL}" stroke="#555"/>',
        f'<line x1="{_LEFT}" y1="{top}" x2="{_LEFT}" y2="{top + _PANEL}" stroke="#555"/>',
        f'<line x1="{_LEFT}" y1="{top}" x2="{right}" y2="{top}" stroke="#ddd"/>',
        f'<text x="{_LEFT - 6}" y="{top + 4}" font-size="11" text-anchor="end">{top_label}</text>',
        f'<text x="{_LEFT - 6}" y="{top + _PANEL + 4}" font-size="11" text-anchor="end">0</text>',
    ]


def _line(
    points: list[tuple[float, float]], top: int, scale: float, colour: str, dash: str
) -> list[str]:
    if not points:
        return []
    coords = " ".join(f"{x:.1f},{_y(v, top, scale):.1f}" for x, v in points)
    dashed = f" stroke-dasharray={quoteattr(dash)}" if dash else ""
    shape = f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"{dashed}/>'
    dots = [
        f'<circle cx="{x:.1f}" cy="{_y(v, top, scale):.1f}" r="2.5" fill="{colour}"/>'
        for x, v in points
    ]
    return [shape, *dots] if len(points) < 40 else [shape]


def _legend(index: int, top: int, colour: str, dash: str, label: str) -> str:
    x = _WIDTH - _RIGHT + 12
    y = top + 10 + 18 * index
    dashed = f" stroke-dasharray={quoteattr(dash)}" if dash else ""
    return (
        f'<line x1="{x}" y1="{y}" x2="{x + 22}" y2="{y}" stroke="{colour}" '
        f'stroke-width="2"{dashed}/>'
        f'<text x="{x + 28}" y="{y + 4}" font-size="11">{escape(label)}</text>'
    )
