"""Co-search of the parallelization plan and the network (``topoopt cosearch``).

``space`` (the plans and their constraints, with the memory model of :mod:`traffic.memory`),
``evaluate`` (one plan on one fabric, by the flow model), ``bounds`` (compute-only lower bounds),
``search`` (TopoOpt's alternating MCMC baseline and our bounded successive refinement), run on
:mod:`topoopt.app.studies.engine` (Ray or in-process).
"""
