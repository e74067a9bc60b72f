"""Benchmark: the list colouring's construction (``colour_by_matchings``) before and after
session 44, CPU seconds and circuits coloured.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_list_colouring.py [--quick] [--old]``.
For every case (servers, strides of a circulant or a random ``d``-regular multigraph, units of
one OCS of ``radix`` ports or one unit per plane), the construction in both colour orders as
``assign_ports`` calls it: session 43's (networkx's weighted blossom per colour, the copy in
``tests/solvers/test_list_colouring.py``) and this one (a maximum-cardinality matching, Kempe
flips and shifts, up to ``MATCHING_TRIES`` tie orders), then ``assign_ports`` end to end (its
search, then the construction unless :func:`matching_bound` excludes a colouring). ``--old``
runs ``assign_ports`` with session 43's construction and no bound. Prints CPU seconds,
circuits coloured of all, and the ratio old / new. ``--compare N --seed S`` instead compares
the two constructions on ``N`` random cases of the test (how often each colours all).
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

import numpy as np

from solvers.cluster.ocs import OcsLayer
from solvers.model import list_colouring
from solvers.model.list_colouring import assign_ports, colour_by_matchings, expand_circuits
from topoopt.fabrics import circulant_circuits
from topoopt.fabrics.circuits import Circuits

HERE = Path(__file__).resolve().parent


def _test_module():
    path = HERE.parent / "tests" / "solvers" / "test_list_colouring.py"
    spec = importlib.util.spec_from_file_location("old_list_colouring", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compare(cases: int, seed: int) -> None:
    """Random cases of the test (``random_case``, up to 40 servers), both colour orders: how
    often each construction colours every circuit, alone (per order) and in ``assign_ports``'
    pair of orders, and how often one colours more circuits than the other."""
    t = _test_module()
    rng = np.random.default_rng(seed)
    n = dict.fromkeys(("old", "new", "old only", "new only", "old only, an order"), 0)
    fewer = more = 0
    for _ in range(cases):
        u, v, allowed, m = t.random_case(rng)
        orders = (None, range(allowed.shape[0] - 1, -1, -1))
        old = [int((t.old_colour_by_matchings(u, v, allowed, m, o) >= 0).sum()) for o in orders]
        new = [int((colour_by_matchings(u, v, allowed, m, o) >= 0).sum()) for o in orders]
        e = u.size
        n["old only, an order"] += sum(a == e > b for a, b in zip(old, new, strict=True))
        fewer += sum(b < a for a, b in zip(old, new, strict=True))
        more += sum(b > a for a, b in zip(old, new, strict=True))
        oc, nc = max(old) == e, max(new) == e
        n["old"] += oc
        n["new"] += nc
        n["old only"] += oc and not nc
        n["new only"] += nc and not oc
    print(f"seed {seed}, {cases} cases, complete in the pair of orders: {n}")
    print(f"per order: new colours fewer circuits {fewer} times, more {more} times")


def _regular(n: int, d: int, seed: int) -> np.ndarray:
    """A random ``d``-regular multigraph (``d`` even): ``d / 2`` random Hamiltonian cycles."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(d // 2):
        p = rng.permutation(n)
        rows.append(np.column_stack([p, np.roll(p, -1), np.ones(n, np.int64)]))
    return np.concatenate(rows)


def cases(quick: bool):
    sizes = (256, 512) if quick else (256, 512, 1024, 2048)
    for n in sizes:
        yield f"circulant 1-4, n={n}", circulant_circuits(n, [1, 2, 3, 4]), n, None
    big = sizes[-1]
    yield f"circulant 1-4, n={big - 1}", circulant_circuits(big - 1, [1, 2, 3, 4]), big - 1, None
    yield f"circulant 1-4, n={big}, radix 136", circulant_circuits(big, [1, 2, 3, 4]), big, 136
    yield f"circulant 1,3,5,7, n={big}, radix 136", circulant_circuits(big, [1, 3, 5, 7]), big, 136
    yield f"random 8-regular, n={big}", _regular(big, 8, 0), big, None


def cpu(f, *args):
    t = time.process_time()
    out = f(*args)
    return out, time.process_time() - t


def both_orders(f, u, v, allowed, n):
    """The construction in the two colour orders ``assign_ports`` tries."""
    return [f(u, v, allowed, n, o) for o in (range(8), range(7, -1, -1))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--old", action="store_true", help="assign_ports with session 43's code")
    ap.add_argument("--compare", type=int, default=0, help="random cases against the old code")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.compare:
        compare(args.compare, args.seed)
        return
    old = _test_module().old_colour_by_matchings
    if args.old:
        list_colouring.colour_by_matchings = old
        list_colouring.matching_bound = lambda *a: np.iinfo(np.int64).max
    print(
        f"{'case':<36} {'circuits':>8} {'old s':>7} {'old col':>8} {'new s':>7} {'new col':>8} "
        f"{'old/new':>7} {'assign s':>8} {'assign col':>10} {'proven':>6}"
    )
    for name, rows, n, radix in cases(args.quick):
        c = Circuits(rows, n)
        units = OcsLayer.build(n, 8, radix).units
        u, v = expand_circuits(c)
        allowed = units[:, u] == units[:, v]
        po, to = cpu(both_orders, old, u, v, allowed, n)
        pn, tn = cpu(both_orders, colour_by_matchings, u, v, allowed, n)
        a, ta = cpu(assign_ports, c, units)
        col_o = max(int((p >= 0).sum()) for p in po)
        col_n = max(int((p >= 0).sum()) for p in pn)
        print(
            f"{name:<36} {u.size:>8} {to:>7.3f} {col_o:>8} {tn:>7.3f} {col_n:>8} "
            f"{to / tn:>7.1f} {ta:>8.3f} {int((a.port >= 0).sum()):>10} {str(a.proven):>6}",
            flush=True,
        )


if __name__ == "__main__":
    main()
