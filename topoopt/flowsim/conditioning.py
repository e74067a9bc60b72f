"""How far rounding alone moves an iteration: runs with every fabric link's bandwidth nudged.

The flow model is exact up to floating-point rounding, but an iteration can amplify rounding: a
pipeline send that finishes 1e-15 s late delays the next compute and the next send, which then
overlaps other sends differently, micro-batch after micro-batch (docs/verdicts.md, "The torus
row's digits are noise": Llama 3 405B on a torus at 2,048 GPUs moves by up to 1.7 % when the
link bandwidth is scaled by ``1 + 1e-15``). Such a result's last digits are noise, and two
exact methods that round differently (the symmetry quotient and the unreduced run) part by as
much.

The check (``simulate --rounding-check N``): the same iteration is simulated again ``N`` times
with every fabric link's capacity multiplied by ``1 + e_k``, ``|e_k|`` log-uniform in
[:data:`SMALLEST`, :data:`LARGEST`] with a random sign (seeded, :func:`nudges`). Scaling every
fabric link by ``1 + e`` moves the exact answer by at most ``|e|`` relative (the communication
on the fabric gets ``1 + e`` times faster, nothing else changes), so any larger spread between
the runs is rounding amplified by the iteration (:func:`summary`). The scaling is uniform, so
every symmetry of the fabric survives it and the runs cost what the nominal run costs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from traffic.errors import InputError

__all__ = [
    "COLUMNS",
    "LARGEST",
    "MAX_RUNS",
    "SMALLEST",
    "WELL_CONDITIONED",
    "check",
    "check_runs",
    "columns",
    "nudged_fabric",
    "nudges",
    "summary",
]

SMALLEST = 1e-15
"""Smallest relative nudge of the link bandwidths (about 4.5 units in the last place)."""

LARGEST = 1e-13
"""Largest relative nudge: the exact iteration moves by at most this much."""

WELL_CONDITIONED = 1e-9
"""A spread at most this (relative to the nominal iteration) is called well conditioned: the
tolerance at which the symmetry quotient must equal the unreduced run (issue 25)."""

MAX_RUNS = 64
"""At most this many nudged runs (each costs one iteration's simulation)."""

COLUMNS = ("rounding_spread", "rounding_std_s", "rounding_conditioned")
"""A table row's figures of the check (:func:`columns`), in ``compare`` and ``advise``."""


def check_runs(runs: int, field: str = "--rounding-check") -> int:
    """``runs`` as an int in ``0 .. MAX_RUNS`` (0: no check), else an :class:`InputError`.

    >>> check_runs(3)
    3
    >>> check_runs(-1)
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: --rounding-check: got -1; allowed: an integer 0..64 (nudged runs)
    """
    integer = isinstance(runs, int | np.integer) and not isinstance(runs, bool)
    if not integer or not 0 <= runs <= MAX_RUNS:
        raise InputError(field, runs, f"an integer 0..{MAX_RUNS} (nudged runs)")
    return int(runs)


def nudges(runs: int, seed: int = 0) -> np.ndarray:
    """``runs`` relative nudges ``e_k``: ``|e_k|`` log-uniform in [SMALLEST, LARGEST], signs
    alternating from + (so that both directions are sampled at any ``runs`` >= 2).

    >>> e = nudges(4, seed=1)
    >>> e.shape, bool(np.all(np.abs(e) >= SMALLEST)), bool(np.all(np.abs(e) <= LARGEST))
    ((4,), True, True)
    >>> np.sign(e).tolist()
    [1.0, -1.0, 1.0, -1.0]
    >>> bool(np.array_equal(nudges(4, seed=1), e))
    True
    """
    runs = check_runs(runs)
    rng = np.random.default_rng([int(seed), 0x5EED_0DD])
    mag = 10.0 ** rng.uniform(math.log10(SMALLEST), math.log10(LARGEST), runs)
    sign = np.where(np.arange(runs) % 2 == 0, 1.0, -1.0)
    return sign * mag


def nudged_fabric(fabric, e: float):
    """A copy of ``fabric`` with every link's capacity multiplied by ``1 + e`` (a fresh cache:
    nothing computed from the nominal capacities is reused).

    >>> from topoopt.fabrics import leaf_spine
    >>> f = leaf_spine(4, radix=4, leaf_hosts=2)
    >>> g = nudged_fabric(f, 1e-13)
    >>> bool(np.all(g.capacity == f.capacity * (1 + 1e-13))), bool(np.all(g.capacity > f.capacity))
    (True, True)
    """
    return replace(fabric, capacity=fabric.capacity * (1.0 + float(e)), _cache={})


def summary(nominal_s: float, nudged_s, scales) -> dict[str, Any]:
    """What the nudged runs say about the nominal iteration ``nominal_s``.

    Returns ``runs``, ``nudges`` (the ``e_k``), ``iteration_s`` (the nudged runs), ``min_s``,
    ``max_s``, ``mean_s``, ``std_s`` (over the nominal and the nudged runs), ``spread``
    (``(max - min) / nominal``), ``stable_digits`` (``floor(-log10(spread))``, at most 15:
    the significant digits rounding leaves alone), ``conditioned`` (``"well"`` when the spread
    is at most :data:`WELL_CONDITIONED`, else ``"ill"``) and ``sentence`` (for a report).

    >>> s = summary(10.0, [10.0, 10.0 + 2e-14], [1e-15, -1e-14])
    >>> s["conditioned"], s["stable_digits"]
    ('well', 14)
    >>> s = summary(10.41, [10.38, 10.50, 10.20], [1e-15, -2e-15, 3e-14])
    >>> s["conditioned"], round(s["spread"], 4), s["stable_digits"]
    ('ill', 0.0288, 1)
    >>> print(s["sentence"])
    Rounding alone moves this iteration by up to 2.88 % (3 runs with every fabric link's bandwidth scaled by 1 + e, |e| <= 3e-14, which moves the exact answer by at most that): read it as 10.37 s +- 0.11 (standard deviation); differences smaller than that are noise.
    """  # noqa: E501
    t = np.asarray(nudged_s, np.float64)
    e = np.asarray(scales, np.float64)
    if t.shape != e.shape or t.ndim != 1 or t.size == 0:
        raise ValueError("one nudged time per nudge")
    nominal = float(nominal_s)
    every = np.concatenate([[nominal], t])
    lo, hi = float(every.min()), float(every.max())
    spread = (hi - lo) / nominal if nominal > 0 else 0.0
    digits = 15 if spread <= 1e-15 else int(min(15, max(0, math.floor(-math.log10(spread)))))
    well = spread <= WELL_CONDITIONED
    biggest = float(np.abs(e).max())
    how = (
        f"{t.size} run{'s' if t.size > 1 else ''} with every fabric link's bandwidth scaled by "
        f"1 + e, |e| <= {biggest:.0e}"
    )
    mean, std = float(every.mean()), float(every.std())
    if well:
        sentence = (
            f"Rounding does not move this iteration: {how} agree with it to {spread:.1e} "
            "(relative)."
        )
    else:
        sentence = (
            f"Rounding alone moves this iteration by up to {100 * spread:.3g} % ({how}, which "
            f"moves the exact answer by at most that): read it as {_sig(mean, std)} "
            "(standard deviation); differences smaller than that are noise."
        )
    return {
        "runs": int(t.size),
        "nudges": e.tolist(),
        "iteration_s": t.tolist(),
        "min_s": lo,
        "max_s": hi,
        "mean_s": mean,
        "std_s": std,
        "spread": spread,
        "stable_digits": digits,
        "conditioned": "well" if well else "ill",
        "sentence": sentence,
    }


def _sig(mean: float, std: float) -> str:
    """``mean +- std`` in seconds, to the standard deviation's first two digits.

    >>> _sig(10.3712, 0.1093), _sig(0.0123456, 0.0000123)
    ('10.37 s +- 0.11', '0.012346 s +- 1.2e-05')
    """
    if std <= 0:
        return f"{mean:.6g} s"
    place = math.floor(math.log10(std)) - 1  # two significant digits of the deviation
    nd = max(0, -place)
    sd = f"{std:.2g}" if std < 1e-4 else f"{round(std, nd):.{nd}f}"
    return f"{round(mean, nd):.{nd}f} s +- {sd}"


def check(
    fabric,
    nominal_s: float,
    runs: int,
    seed: int,
    iteration_s: Callable[[Any], float],
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The rounding check of one simulation: ``iteration_s(nudged_fabric(fabric, e_k))`` for
    each of :func:`nudges` ``(runs, seed)``, summarised against ``nominal_s``
    (:func:`summary`). ``iteration_s`` is the caller's simulation with its own routes and
    options, the fabric its only argument.

    >>> from topoopt.fabrics import leaf_spine
    >>> f = leaf_spine(4, radix=4, leaf_hosts=2)
    >>> t = lambda fab: 1e9 / fab.capacity[0]  # a transfer alone: bytes over bandwidth
    >>> got = check(f, t(f), 2, 0, t)
    >>> got["runs"], got["conditioned"], got["spread"] <= 2 * LARGEST
    (2, 'well', True)
    """
    e = nudges(runs, seed)
    times = []
    for k, ek in enumerate(e):
        if progress:
            progress(f"rounding check {k + 1}/{runs}: bandwidths x (1 {ek:+.1e})")
        times.append(float(iteration_s(nudged_fabric(fabric, ek))))
    return summary(nominal_s, times, e)


def columns(got: dict[str, Any]) -> dict[str, Any]:
    """A table row's :data:`COLUMNS` from a :func:`summary`.

    >>> columns(summary(1.0, [1.0], [1e-15]))
    {'rounding_spread': 0.0, 'rounding_std_s': 0.0, 'rounding_conditioned': 'well'}
    """
    return {
        "rounding_spread": got["spread"],
        "rounding_std_s": got["std_s"],
        "rounding_conditioned": got["conditioned"],
    }
