"""Studies: end-to-end pipelines on top of traffic, fabrics, the flow model and the solvers
(``compare``, the demo, sweeps). An edge package: it may import everything, nothing imports it
but the CLI and the notebooks."""
