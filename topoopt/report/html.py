"""Self-contained, reproducible HTML pages from plotly figures.

plotly.js is embedded (the page works offline) and every figure gets a fixed ``div_id``, so the
same input gives byte-identical files.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import plotly.graph_objects as go
import plotly.io as pio

__all__ = ["page_html"]


def page_html(
    figures: Sequence[tuple[str, go.Figure]],
    title: str,
    intro: str = "",
) -> str:
    """One HTML page holding ``figures`` (``(div_id, figure)`` pairs) under a title.

    plotly.js is included once, inline; each figure is a ``div`` with the given id.
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
        "<style>body{font-family:sans-serif;margin:1.5em;max-width:1200px}"
        "section.figure{margin-bottom:2em}</style>\n</head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n"
        + (f"<p>{html.escape(intro)}</p>\n" if intro else "")
        + body
        + "\n</body>\n</html>\n"
    )
