"""One style per fabric across every report: the same colour, marker symbol and dash for
``joint`` in ``compare``, ``demo``, ``cosearch``, ``advise`` and the optimizer traces.

:data:`FABRIC_STYLES` fixes the style of every fabric the studies build; a name it does not know
(a custom label) gets the first style of :func:`trace_style`'s cycle that no named fabric of the
same figure uses, so the traces of one figure stay distinct. :data:`BOUNDS` are the fabrics that
are bounds, not products (the ideal switch): cost plots leave them off.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "BOUNDS",
    "FABRIC_STYLES",
    "PALETTE",
    "SYMBOLS",
    "DASHES",
    "trace_style",
    "fabric_styles",
    "is_bound",
]

BOUNDS = ("ideal",)
"""Fabrics that bound the others and are not for sale: left off cost plots, named as bounds."""

# Distinct styles for one trace per fabric: colours (plotly's D3 palette, then more), marker
# symbols and line dashes cycle at different lengths, so no two of the first 70 traces share all.
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
)  # fmt: skip
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star", "cross")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot", "5px,2px,1px,2px")

FABRIC_STYLES: dict[str, dict[str, str]] = {
    "ideal": {"color": "#222222", "symbol": "star-open", "dash": "dot"},
    "fat-tree": {"color": "#1f77b4", "symbol": "circle", "dash": "solid"},
    "fat-tree-oversub": {"color": "#aec7e8", "symbol": "circle-open", "dash": "dash"},
    "fat-tree-cost-equivalent": {"color": "#17becf", "symbol": "square", "dash": "dash"},
    "fat-tree-ina": {"color": "#9edae5", "symbol": "circle-dot", "dash": "dot"},
    "torus": {"color": "#8c564b", "symbol": "diamond", "dash": "solid"},
    "expander": {"color": "#bcbd22", "symbol": "triangle-up", "dash": "solid"},
    "topoopt": {"color": "#ff7f0e", "symbol": "square", "dash": "solid"},
    "topoopt-released": {"color": "#ffbb78", "symbol": "square-open", "dash": "dot"},
    "topoopt-best": {"color": "#d62728", "symbol": "diamond", "dash": "dash"},
    "joint": {"color": "#2ca02c", "symbol": "star", "dash": "solid"},
    "hybrid": {"color": "#9467bd", "symbol": "x", "dash": "solid"},
    "hybrid-ina": {"color": "#c5b0d5", "symbol": "x", "dash": "dash"},
    "rail": {"color": "#e377c2", "symbol": "cross", "dash": "solid"},
    "rail-only": {"color": "#f7b6d2", "symbol": "cross", "dash": "dash"},
    "ocs-spine": {"color": "#7f7f7f", "symbol": "triangle-down", "dash": "solid"},
    "rail-circuits": {"color": "#8f3f71", "symbol": "cross-open", "dash": "dot"},
    "rail-circuits-2": {"color": "#c49c94", "symbol": "cross-open", "dash": "dashdot"},
    "joint-phased": {"color": "#98df8a", "symbol": "star-open", "dash": "dash"},
}
"""The style of every fabric of :data:`topoopt.app.studies.compare.FABRICS` (a test checks
that each has one and that no two share a colour)."""


def trace_style(k: int) -> dict[str, str]:
    """Colour, marker symbol and dash of the ``k``-th trace of a figure (distinct for k < 70).

    Examples
    --------
    >>> trace_style(0) == {"color": "#1f77b4", "symbol": "circle", "dash": "solid"}
    True
    >>> len({tuple(trace_style(k).values()) for k in range(70)})
    70
    """
    return {
        "color": PALETTE[k % len(PALETTE)],
        "symbol": SYMBOLS[k % len(SYMBOLS)],
        "dash": DASHES[k % len(DASHES)],
    }


def fabric_styles(names: Iterable[str]) -> dict[str, dict[str, str]]:
    """The style of each of ``names`` in one figure: a named fabric's own, and for any other
    name the next style of the :func:`trace_style` cycle whose colour no named fabric of the
    figure has (so every trace of the figure is told apart).

    Examples
    --------
    >>> s = fabric_styles(["joint", "my-fabric", "fat-tree"])
    >>> s["joint"] == FABRIC_STYLES["joint"], s["my-fabric"]["color"]
    (True, '#ff7f0e')
    """
    names = list(dict.fromkeys(names))
    taken = {FABRIC_STYLES[n]["color"] for n in names if n in FABRIC_STYLES}
    out, k = {}, 0
    for n in names:
        if n in FABRIC_STYLES:
            out[n] = dict(FABRIC_STYLES[n])
            continue
        while trace_style(k)["color"] in taken and k < 10 * len(PALETTE):
            k += 1
        out[n] = trace_style(k)
        k += 1
    return out


def is_bound(name: str) -> bool:
    """Whether fabric ``name`` is a bound (:data:`BOUNDS`), not a product."""
    return name in BOUNDS
