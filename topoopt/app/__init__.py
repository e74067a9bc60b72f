"""The edges of topoopt: the command line (:mod:`topoopt.app.cli`), the plotly reports
(:mod:`topoopt.app.report`) and the end-to-end studies (:mod:`topoopt.app.studies`, co-search
inside).

This is the one part of :mod:`topoopt` that may import :mod:`solvers`; :mod:`solvers` never
imports it (``tests/test_layering.py`` checks both rules). The edges reach the solvers through
``solvers/__init__`` only.
"""

__all__: list[str] = []
