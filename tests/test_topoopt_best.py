"""``topoopt-best`` in ``compare``: the faster of the two faithful TopoOpt variants (issue 13)."""

from __future__ import annotations

import pytest

from topoopt.app.studies.compare import compare
from traffic.load import load_workload


@pytest.mark.parametrize("degree", [4, 8])
def test_topoopt_best_is_the_faster_variant_and_names_it(degree):
    w = load_workload("dlrm")
    t = compare(
        w, ["topoopt", "topoopt-released", "topoopt-best"], degree=degree, link_bandwidth=12.5e9
    ).table.set_index("fabric")
    variants = t.loc[["topoopt", "topoopt-released"], "iteration_s"]
    best = t.loc["topoopt-best"]
    assert best["iteration_s"] == pytest.approx(variants.min(), rel=1e-12)
    assert best["solver"] == variants.idxmin()
    assert t.loc[variants.idxmin(), "solver"] == variants.idxmin()
