"""Self-contained, reproducible HTML pages from plotly figures.

plotly.js is embedded (the page works offline) and every figure gets a fixed ``div_id``, so the
same input gives byte-identical files.
"""

from __future__ import annotations

import html
import math
from collections.abc import Collection, Sequence

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

__all__ = ["page_html", "summary_html"]

_STYLE = (
    "body{font-family:sans-serif;margin:1.5em;max-width:1200px}"
    "section.figure{margin-bottom:2em}"
    "table.summary{border-collapse:collapse;margin:0.5em 0 1.5em 0;font-size:0.9em}"
    "table.summary caption{text-align:left;font-weight:bold;padding-bottom:0.3em}"
    "table.summary th,table.summary td{padding:0.2em 0.7em;border-bottom:1px solid #ddd}"
    "table.summary td.num{text-align:right;font-variant-numeric:tabular-nums}"
    "table.summary th{text-align:left;background:#f3f3f3}"
    "table.summary tr.best td{background:#e3f4e1;font-weight:bold}"
    "div#verdict{border-left:4px solid #2e7d32;padding:0.3em 1em;margin:1em 0;background:#f6fbf5}"
    "div#warnings{border-left:4px solid #b26a00;padding:0.3em 1em;margin:1em 0;background:#fff8e6}"
)


def _cell(value) -> tuple[str, bool]:
    """Text of one table cell and whether it is a number (right-aligned)."""
    if isinstance(value, bool) or value is None:
        return ("" if value is None else str(value)), False
    if isinstance(value, int | float) and not isinstance(value, bool):
        f = float(value)
        if not math.isfinite(f):
            return "-", True
        if float(f).is_integer() and abs(f) < 1e15:
            return f"{int(f):,}", True
        return f"{f:,.4g}" if abs(f) < 1e4 else f"{f:,.0f}", True
    if hasattr(value, "item"):  # numpy scalars
        return _cell(value.item())
    return str(value), False


def summary_html(
    frame: pd.DataFrame, caption: str = "Summary", highlight: Collection[int] = ()
) -> str:
    """An HTML table of ``frame`` (columns as headers; numbers right-aligned, 4 significant
    digits, non-finite shown as ``-``), for the top of a report; the rows at the positions in
    ``highlight`` are marked ``class="best"``.

    Examples
    --------
    >>> import pandas as pd
    >>> print(summary_html(pd.DataFrame({"fabric": ["ideal"], "iteration ms": [1.23456]})))
    <table class="summary"><caption>Summary</caption>
    <tr><th>fabric</th><th>iteration ms</th></tr>
    <tr><td>ideal</td><td class="num">1.235</td></tr>
    </table>
    """
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = []
    for i, rec in enumerate(frame.itertuples(index=False)):
        cells = []
        for v in rec:
            text, num = _cell(v)
            cls = ' class="num"' if num else ""
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        rows.append(('<tr class="best">' if i in highlight else "<tr>") + "".join(cells) + "</tr>")
    return (
        f'<table class="summary"><caption>{html.escape(caption)}</caption>\n'
        f"<tr>{head}</tr>\n" + "\n".join(rows) + "\n</table>"
    )


def _marks(k: int, highlight: Collection[int], highlights: Sequence[Collection[int]]):
    """The rows to mark in summary table ``k`` (:func:`page_html`)."""
    if highlights:
        return highlights[k] if k < len(highlights) else ()
    return highlight if k == 0 else ()


def page_html(
    figures: Sequence[tuple[str, go.Figure]],
    title: str,
    intro: str = "",
    summary: Sequence[tuple[str, pd.DataFrame]] = (),
    verdict: Sequence[str] = (),
    highlight: Collection[int] = (),
    warnings: Sequence[str] = (),
    highlights: Sequence[Collection[int]] = (),
) -> str:
    """One HTML page holding ``figures`` (``(div_id, figure)`` pairs) under a title.

    plotly.js is included once, inline; each figure is a ``div`` with the given id. ``summary``
    (``(caption, table)`` pairs) is shown as HTML tables at the top, before the figures;
    ``verdict`` sentences open the page in ``<div id="verdict">``, and ``highlight`` marks rows of
    the first summary table (:func:`summary_html`). ``warnings`` (the command's warning lines:
    a search that fell back, was cut by the clock or coarsened) follow the verdict in
    ``<div id="warnings">``. ``highlights`` (one collection per summary table) marks rows of
    every table instead.
    """
    parts = []
    for k, (div_id, fig) in enumerate(figures):
        parts.append(
            pio.to_html(
                fig,
                include_plotlyjs=(k == 0),
                full_html=False,
                div_id=div_id,
                config={"displaylogo": False, "responsive": True},
            )
        )
    body = "\n".join(f'<section class="figure">{p}</section>' for p in parts)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<style>{_STYLE}</style>\n</head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n"
        + (f"<p>{html.escape(intro)}</p>\n" if intro else "")
        + (
            '<div id="verdict">' + "".join(f"<p>{html.escape(s)}</p>" for s in verdict) + "</div>\n"
            if verdict
            else ""
        )
        + (
            '<div id="warnings">'
            + "".join(f"<p>{html.escape(s)}</p>" for s in warnings)
            + "</div>\n"
            if warnings
            else ""
        )
        + "".join(
            summary_html(frame, caption, _marks(k, highlight, highlights)) + "\n"
            for k, (caption, frame) in enumerate(summary)
        )
        + body
        + "\n</body>\n</html>\n"
    )
