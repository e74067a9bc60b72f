"""The solvers' ground floor: the server-level problem (:mod:`.problem`), the design types and
``design.json`` (:mod:`.design`, :mod:`.design_schema`), the congestion objective
(:mod:`.congestion`) and the port options every solver honours (:mod:`.ports`).

Nothing here imports another part of :mod:`solvers`.
"""

__all__: list[str] = []
