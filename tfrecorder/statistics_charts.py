"""Inline SVG charts for the statistics report: bars, grouped bars per split, histograms (issue 29).

Each chart is one `<svg class="tfr-chart">` element with explicit width and height, text escaped, no
script, no external resource: the report stays self-contained, in a notebook and in a browser alike.
"""
from __future__ import annotations

import html
from typing import Mapping, Sequence

SPLIT_COLOURS = {"TRAIN": "#4c78a8", "VALIDATION": "#f58518", "TEST": "#54a24b"}
COLOUR = "#4c78a8"
WIDTH = 440
ROW = 18  # pixels per bar of a horizontal chart
LABEL_WIDTH = 130
MAX_BARS = 25


def _fmt(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{int(value):,}"


def _svg(width: int, height: int, title: str, body: str) -> str:
    return (f'<svg class="tfr-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">'
            f'<text x="4" y="14" font-size="12" font-weight="bold" font-family="sans-serif">{html.escape(title)}</text>'
            f"{body}</svg>")


def _label(text: str, limit: int = 20) -> str:
    text = str(text)
    return html.escape(text if len(text) <= limit else text[: limit - 1] + "…")


def bar_chart(title: str, items: Sequence[tuple[str, float]], unit: str = "", colour: str = COLOUR) -> str:
    """Horizontal bars, one per (label, value), longest first as given; at most MAX_BARS."""
    items = list(items)[:MAX_BARS]
    height = 24 + ROW * max(len(items), 1) + 6
    top = max((value for _, value in items), default=0) or 1
    span = WIDTH - LABEL_WIDTH - 70
    body = []
    for i, (label, value) in enumerate(items):
        y = 22 + i * ROW
        length = max(span * value / top, 1 if value else 0)
        body.append(f'<text x="{LABEL_WIDTH - 4}" y="{y + 12}" font-size="11" text-anchor="end" '
                    f'font-family="sans-serif">{_label(label)}</text>'
                    f'<rect x="{LABEL_WIDTH}" y="{y + 2}" width="{length:.1f}" height="{ROW - 5}" fill="{colour}">'
                    f"<title>{html.escape(str(label))}: {_fmt(value)}{unit}</title></rect>"
                    f'<text x="{LABEL_WIDTH + length + 4:.1f}" y="{y + 12}" font-size="10" '
                    f'font-family="sans-serif">{_fmt(value)}{unit}</text>')
    if not items:
        body.append('<text x="4" y="34" font-size="11" font-family="sans-serif">no values</text>')
    return _svg(WIDTH, height, title, "".join(body))


def grouped_bars(title: str, labels: Sequence[str], series: Mapping[str, Mapping[str, float]]) -> str:
    """For each label, one bar per split (colour per split), with a legend: label distribution per split."""
    labels = list(labels)[:MAX_BARS]
    splits = list(series)
    per_label = ROW * max(len(splits), 1) * 0.6 + 6
    height = int(40 + per_label * max(len(labels), 1))
    top = max((value for counts in series.values() for value in counts.values()), default=0) or 1
    span = WIDTH - LABEL_WIDTH - 70
    body = []
    for j, split in enumerate(splits):
        colour = SPLIT_COLOURS.get(split, COLOUR)
        body.append(f'<rect x="{LABEL_WIDTH + j * 95}" y="20" width="10" height="10" fill="{colour}"/>'
                    f'<text x="{LABEL_WIDTH + j * 95 + 14}" y="29" font-size="10" font-family="sans-serif">'
                    f"{html.escape(split.lower())}</text>")
    bar = per_label / max(len(splits), 1) - 1 if splits else 0
    for i, label in enumerate(labels):
        y = 36 + i * per_label
        body.append(f'<text x="{LABEL_WIDTH - 4}" y="{y + per_label / 2 + 3:.1f}" font-size="11" text-anchor="end" '
                    f'font-family="sans-serif">{_label(label)}</text>')
        for j, split in enumerate(splits):
            value = series[split].get(label, 0)
            length = max(span * value / top, 1 if value else 0)
            body.append(f'<rect x="{LABEL_WIDTH}" y="{y + j * (bar + 1):.1f}" width="{length:.1f}" height="{bar:.1f}" '
                        f'fill="{SPLIT_COLOURS.get(split, COLOUR)}"><title>{html.escape(str(label))} in '
                        f"{html.escape(split)}: {_fmt(value)}</title></rect>"
                        f'<text x="{LABEL_WIDTH + length + 3:.1f}" y="{y + j * (bar + 1) + bar - 1:.1f}" font-size="9" '
                        f'font-family="sans-serif">{_fmt(value)}</text>')
    return _svg(WIDTH, height, title, "".join(body))


def histogram(title: str, bins: Sequence[Mapping[str, float]], colour: str = COLOUR, width: int = 300) -> str:
    """Vertical bars of equal-width bins ({"low", "high", "count"}), the range written underneath."""
    height = 150
    plot_top, plot_bottom = 22, height - 24
    top = max((b["count"] for b in bins), default=0) or 1
    step = (width - 20) / max(len(bins), 1)
    body = []
    for i, b in enumerate(bins):
        tall = (plot_bottom - plot_top) * b["count"] / top
        body.append(f'<rect x="{10 + i * step:.1f}" y="{plot_bottom - tall:.1f}" width="{max(step - 2, 1):.1f}" '
                    f'height="{tall:.1f}" fill="{colour}"><title>{_fmt(b["low"])} – {_fmt(b["high"])}: '
                    f'{_fmt(b["count"])}</title></rect>')
    if bins:
        body.append(f'<text x="10" y="{height - 8}" font-size="10" font-family="sans-serif">{_fmt(bins[0]["low"])}</text>'
                    f'<text x="{width - 10}" y="{height - 8}" font-size="10" text-anchor="end" '
                    f'font-family="sans-serif">{_fmt(bins[-1]["high"])}</text>')
    else:
        body.append('<text x="10" y="60" font-size="11" font-family="sans-serif">no values</text>')
    body.append(f'<line x1="10" y1="{plot_bottom}" x2="{width - 10}" y2="{plot_bottom}" stroke="#888"/>')
    return _svg(width, height, title, "".join(body))
