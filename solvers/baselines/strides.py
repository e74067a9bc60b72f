"""Stride sets of circulant graphs: TotientPerms, the geometric rule, exact optimisation.

A bidirectional circulant graph ``C_n(s_1, ..., s_k)`` joins every server ``i`` to ``i + s_j`` and
``i - s_j`` (mod ``n``). When every stride is coprime with ``n`` each stride is one ring through
all ``n`` servers, so the graph is the union of ``k`` rings and uses ``d = 2k`` ports per server.

This module holds

- :func:`totient_perms`: the candidate rings of a group (TopoOpt's TotientPerms), including the
  released code's coset version for groups spaced ``n/g`` apart;
- :func:`select_permutations` / :func:`geometric_strides`: TopoOpt's SelectPermutations rule
  (an approximately geometric sequence of strides), as the released code does it;
- :func:`circulant_distances` / :func:`circulant_stats`: exact hop distances, diameter and mean
  hop count (one vectorised BFS from node 0: the graph is vertex-transitive);
- :func:`best_strides`: an exact optimiser of the diameter or the mean hop count over all stride
  sets coprime with ``n``, with a proof status.

Exact search (:func:`best_strides`)
-----------------------------------
1. *Symmetry.* For a unit ``u`` of ``Z_n``, ``x -> u x`` maps ``C_n(S)`` onto ``C_n(uS)``
   (an isomorphism), and ``+s`` / ``-s`` give the same circuits. Stride sets are written as
   sets of classes ``min(s, n - s)``. Every orbit contains sets holding stride 1 (multiply by
   ``s^-1`` for any ``s`` in the set); the search visits only *canonical* sets: those that are
   lexicographically smallest among ``{sort(s^-1 S) : s in S}`` (the only multipliers that can
   give a set holding 1). Each orbit keeps at least one canonical member.
2. *Bounds.* In a ``2k``-regular abelian Cayley graph every node at distance exactly ``h`` is the
   image of a lattice point ``x in Z^k`` with ``|x|_1 = h``, so at most
   ``L(k, h) = B(k, h) - B(k, h-1)`` nodes lie at distance ``h``, where
   ``B(k, h) = sum_i 2^i C(k, i) C(h, i)`` (lattice points of the ``L1`` ball). Filling the
   ``n - 1`` other nodes greedily into these layers gives the global (Moore-like) lower bound on
   the total distance; the smallest ``h`` with ``B(k, h) >= n`` bounds the diameter.
3. *Truncated evaluation.* Each candidate is first evaluated only up to ``H`` hops (the images of
   the lattice points of norm ``<= H``, written level by level, all candidates of a batch at
   once). Nodes not reached within ``H`` hops are filled greedily into the layers
   ``H+1, H+2, ...`` with the capacities above: a lower bound. Candidates whose bound is worse
   than the incumbent are pruned; the others are evaluated exactly by BFS.
4. The search is exhaustive over canonical sets, so when it finishes the result is optimal
   (status ``"optimal"``). With a time limit it may stop early (status ``"time-limit"``) and
   return the best set found and the global lower bound.

Objectives are lexicographic: ``"mean-hops"`` minimises (total distance, diameter),
``"diameter"`` minimises (diameter, total distance); ties go to the lexicographically smallest
canonical set, so the answer is deterministic.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

import numpy as np

from topoopt.fabrics.direct_connect import select_permutations
from traffic.errors import InputError
from traffic.limits import check_count

__all__ = [
    "MAX_SETS_TO_PROOF",
    "OBJECTIVES",
    "StrideResult",
    "coprime_strides",
    "totient_perms",
    "select_permutations",
    "geometric_strides",
    "circulant_distances",
    "circulant_stats",
    "moore_layers",
    "moore_lower_bound",
    "canonical_strides",
    "best_strides",
]

OBJECTIVES = ("diameter", "mean-hops")
"""Objectives of :func:`best_strides`."""

_BATCH = 4096  # candidate sets evaluated together (memory ~ _BATCH * n / 2 bytes, capped:)
_BATCH_BYTES = 1 << 28  # per-class distances of one batch (int8): rows = this / (n / 2)
_LATTICE_POINTS = 2_000_000  # most lattice points of a truncated bound (else: exact BFS only)
_BATCH_IMAGES = 2_000_000  # lattice images of one batch (rows x points; ~0.3 s here)
_SAMPLE = 2048  # random stride sets tried first, for a good incumbent
MAX_SETS_TO_PROOF = 10_000_000
"""Stride sets (``C(phi(n)/2 - 1, d/2 - 1)``, before symmetry) a search without a time limit
may enumerate: about half a minute here (``n = 3000, d = 8``, just beyond it: 10.5 M sets, 36 s
CPU, 2.6 M evaluated after symmetry). Beyond it the proof is refused up front, naming
``--time-limit``
(``strides 1000000 8`` would enumerate 1.3e15 sets and ran for hours)."""
_SAMPLE_SLICE = 128  # ... evaluated this many at a time (the time limit is checked between)


# --------------------------------------------------------------------------- candidates
def _check_n(n: int, field: str = "n", minimum: int = 3) -> int:
    if isinstance(n, bool) or int(n) != n or n < minimum:
        raise InputError(field, n, f"an integer >= {minimum}")
    check_count(field, int(n), 64, "servers (stride arrays)")  # memory budget, before arrays
    return int(n)


def coprime_strides(n: int) -> np.ndarray:
    """Strides ``p`` in ``[1, n-1]`` with ``gcd(p, n) = 1``, ascending.

    Examples
    --------
    >>> coprime_strides(12).tolist()
    [1, 5, 7, 11]
    """
    n = _check_n(n, minimum=2)
    p = np.arange(1, n, dtype=np.int64)
    return p[np.gcd(p, n) == 1]


def totient_perms(n: int, g: int | None = None) -> np.ndarray:
    """Candidate ring strides of a group of ``g`` servers (TopoOpt's TotientPerms).

    The group is a coset of ``Z_n`` spaced ``n/g`` apart (``{s, s + n/g, s + 2n/g, ...}``), as in
    the released TopoOpt code; its rings are ``i -> i + p`` over the ``g`` positions with
    ``gcd(p, g) = 1`` (exactly the single cycles), which is the stride ``(n/g) p`` in server-index
    space. ``p`` and ``g - p`` are the same ring reversed; both are listed, ascending.

    Parameters
    ----------
    n : int
        Number of servers.
    g : int, optional
        Group size, a divisor of ``n`` (default ``n``: one group of all servers).

    Returns
    -------
    numpy.ndarray
        ``int64`` strides in server-index space; empty for ``g = 1``.

    Raises
    ------
    InputError
        If ``g`` does not divide ``n``.

    Examples
    --------
    >>> totient_perms(12).tolist()
    [1, 5, 7, 11]
    >>> totient_perms(12, 4).tolist()
    [3, 9]
    """
    n = _check_n(n, minimum=1)
    g = n if g is None else g
    if isinstance(g, bool) or int(g) != g or g < 1 or n % int(g):
        raise InputError("g", g, f"a divisor of n={n}")
    g = int(g)
    if g == 1:
        return np.zeros(0, dtype=np.int64)
    p = np.arange(1, g, dtype=np.int64)
    return (n // g) * p[np.gcd(p, g) == 1]


def _check_degree(d: int, field: str = "d") -> int:
    if isinstance(d, bool) or int(d) != d or d < 2 or d % 2:
        raise InputError(field, d, "an even number of ports >= 2 (each stride uses +p and -p)")
    return int(d)


def geometric_strides(n: int, d: int) -> list[int]:
    """TopoOpt's stride set for ``n`` servers in one group and ``d`` ports (``d/2`` strides).

    Examples
    --------
    >>> geometric_strides(12, 4)
    [1, 5]
    >>> geometric_strides(128, 6)
    [1, 7, 27]
    """
    n = _check_n(n)
    d = _check_degree(d)
    return _geometric(totient_perms(n), d // 2)


def _geometric(cand: np.ndarray, k: int) -> list[int]:
    """:func:`select_permutations` of the ascending distinct strides ``cand``, vectorised."""
    if cand.size <= 4096:
        return select_permutations(cand, k)
    # select_permutations' rule on a sorted array (its Python set of phi(n) ints is slow at 10^6+)
    if not 1 <= k <= cand.size:
        raise InputError("k", k, f"an integer in [1, {cand.size}] (the number of candidates)")
    ratio = (float(cand[-1]) / float(cand[0])) ** (1.0 / k)
    value = float(cand[0])
    chosen: list[int] = []
    for _ in range(k):
        i = int(np.searchsorted(cand, value - 1e-9, side="left"))
        while i < cand.size and int(cand[i]) in chosen:
            i += 1
        if i == cand.size:  # the largest unused candidate
            i = cand.size - 1
            while int(cand[i]) in chosen:
                i -= 1
        chosen.append(int(cand[i]))
        value *= ratio
    return chosen


# --------------------------------------------------------------------------- distances
def _offsets(n: int, strides: Sequence[int]) -> np.ndarray:
    s = np.asarray(list(strides), dtype=np.int64).reshape(-1) % n
    if s.size == 0:
        raise InputError("strides", list(strides), "at least one stride")
    return np.unique(np.concatenate([s, (-s) % n]))


class _OutOfTime(Exception):
    """The clock of :func:`best_strides` ran out inside an evaluation."""


def circulant_distances(
    n: int, strides: Sequence[int], deadline: float | None = None
) -> np.ndarray:
    """Hop distance from node 0 to every node of the bidirectional circulant ``C_n(strides)``.

    One BFS from node 0 (the graph is vertex-transitive, so the distance from ``i`` to ``j`` is
    ``dist[(j - i) mod n]``), each level vectorised over the frontier. Unreachable nodes get
    ``-1`` (the strides then share a factor with ``n``). ``deadline`` (a ``time.perf_counter``
    value) stops the search between levels.

    Examples
    --------
    >>> circulant_distances(8, [1]).tolist()
    [0, 1, 2, 3, 4, 3, 2, 1]
    >>> circulant_distances(6, [2]).tolist()
    [0, -1, 1, -1, 1, -1]
    """
    n = _check_n(n, minimum=1)
    off = _offsets(n, strides)
    dist = np.full(n, -1, dtype=np.int64)
    dist[0] = 0
    frontier = np.zeros(1, dtype=np.int64)
    level = 0
    while frontier.size:
        level += 1
        if deadline is not None and time.perf_counter() > deadline:
            raise _OutOfTime
        nxt = ((frontier[:, None] + off[None, :]) % n).reshape(-1)
        nxt = nxt[dist[nxt] < 0]
        # each new node once, without sorting: one write per node survives, whichever it is
        tag = -2 - np.arange(nxt.size, dtype=np.int64)
        dist[nxt] = tag
        nxt = nxt[dist[nxt] == tag]
        dist[nxt] = level
        frontier = nxt
    return dist


def circulant_stats(n: int, strides: Sequence[int]) -> tuple[int, float]:
    """Diameter and mean hop count over ordered pairs of distinct nodes of ``C_n(strides)``.

    Raises
    ------
    InputError
        If the graph is disconnected (a stride set whose gcd with ``n`` is not 1).

    Examples
    --------
    >>> d, m = circulant_stats(12, [1, 5])
    >>> d, round(m, 3)
    (3, 1.818)
    """
    dist = circulant_distances(n, strides)
    if (dist < 0).any():
        raise InputError("strides", list(strides), f"a set generating Z_{n} (connected graph)")
    return int(dist.max()), float(dist.sum()) / max(n - 1, 1)


# --------------------------------------------------------------------------- bounds
@lru_cache(maxsize=256)
def _ball(k: int, h: int) -> int:
    """Lattice points of ``Z^k`` with ``L1`` norm ``<= h``."""
    if h < 0:
        return 0
    return sum(2**i * math.comb(k, i) * math.comb(h, i) for i in range(min(k, h) + 1))


def moore_layers(k: int, h_max: int) -> np.ndarray:
    """``L(k, h)`` for ``h = 0..h_max``: most nodes at distance exactly ``h`` with ``k`` strides.

    Examples
    --------
    >>> moore_layers(2, 4).tolist()
    [1, 4, 8, 12, 16]
    """
    return np.array([_ball(k, h) - _ball(k, h - 1) for h in range(h_max + 1)], dtype=np.int64)


def _fill_bound(remaining: np.ndarray, k: int, start: int) -> tuple[np.ndarray, np.ndarray]:
    """Least total distance and least diameter for ``remaining`` nodes at distance >= ``start``.

    The nodes are filled greedily into layers ``start, start+1, ...`` of capacity ``L(k, h)``.
    Vectorised over ``remaining``; returns ``(extra_distance, diameter_bound)`` (diameter bound
    ``start - 1`` where nothing remains).
    """
    remaining = np.asarray(remaining, dtype=np.int64)
    extra = np.zeros(remaining.shape, dtype=np.int64)
    diam = np.full(remaining.shape, start - 1, dtype=np.int64)
    left = remaining.copy()
    h = start
    while (left > 0).any():
        cap = _ball(k, h) - _ball(k, h - 1)
        put = np.minimum(left, cap)
        extra += put * h
        diam = np.where(put > 0, h, diam)
        left -= put
        h += 1
    return extra, diam


def moore_lower_bound(n: int, d: int) -> tuple[int, float]:
    """Lower bounds on the diameter and mean hop count of any ``d``-regular circulant on ``n``.

    Examples
    --------
    >>> moore_lower_bound(128, 8)
    (3, 2.622047244094488)
    """
    n = _check_n(n)
    k = _check_degree(d) // 2
    extra, diam = _fill_bound(np.array([n - 1]), k, 1)
    return int(diam[0]), float(extra[0]) / (n - 1)


# --------------------------------------------------------------------------- symmetry
def _classes(n: int, deadline: float | None = None) -> np.ndarray:
    """Stride classes ``min(s, n-s)`` coprime with ``n``, ascending (in slices of 10^7, so that a
    ``deadline`` stops it: ``gcd`` over ``10^8`` strides takes seconds)."""
    parts = []
    for lo in range(1, n // 2 + 1, 10_000_000):
        if deadline is not None and time.perf_counter() > deadline:
            raise _OutOfTime
        p = np.arange(lo, min(lo + 10_000_000, n // 2 + 1), dtype=np.int64)
        parts.append(p[np.gcd(p, n) == 1])
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _inverses(values: np.ndarray, n: int) -> np.ndarray:
    """``u^-1 mod n`` of each unit ``u`` in ``values`` (only the distinct values are inverted:
    a table of all of ``Z_n``'s units is ``phi(n)`` Python calls, minutes at ``n = 10^8``)."""
    uniq, back = np.unique(values, return_inverse=True)
    inv = np.array([pow(int(u), -1, n) for u in uniq.tolist()], dtype=np.int64)
    return inv[back].reshape(np.shape(values))


def _canonical_mask(sets: np.ndarray, n: int) -> np.ndarray:
    """Which rows (ascending stride classes, each holding 1) are canonical under ``S -> uS``."""
    keep = np.ones(sets.shape[0], dtype=bool)
    for i in range(1, sets.shape[1]):
        u = _inverses(sets[:, i], n)
        img = (u[:, None] * sets) % n
        img = np.sort(np.minimum(img, n - img), axis=1)
        diff = img - sets
        nz = diff != 0
        first = np.argmax(nz, axis=1)
        smaller = nz.any(axis=1) & (diff[np.arange(sets.shape[0]), first] < 0)
        keep &= ~smaller
    return keep


def canonical_strides(n: int, strides: Sequence[int]) -> list[int]:
    """The canonical representative of a stride set under multipliers and reversal.

    The lexicographically smallest sorted set of classes ``min(s, n-s)`` among ``u S`` over all
    units ``u`` (it holds stride 1). Isomorphic circulants share it when they are related by a
    multiplier.

    Examples
    --------
    >>> canonical_strides(128, [3, 39])
    [1, 13]
    """
    n = _check_n(n)
    s = np.unique(
        np.minimum(
            np.asarray(list(strides), np.int64) % n, (-np.asarray(list(strides), np.int64)) % n
        )
    )
    if s.size == 0 or (np.gcd(s, n) != 1).any():
        raise InputError("strides", list(strides), f"distinct strides coprime with n={n}")
    best: tuple[int, ...] | None = None
    for x in s.tolist():
        img = (pow(x, -1, n) * s) % n
        cand = tuple(sorted(np.minimum(img, n - img).tolist()))
        if best is None or cand < best:
            best = cand
    assert best is not None
    return list(best)


# --------------------------------------------------------------------------- enumeration
def _approx(count: int) -> str:
    """``count`` to three significant digits (``1.33e+12``), also past the float range."""
    return format(Decimal(count), ".3g")


def _combinations(m: int, r: int) -> np.ndarray:
    """All ``r``-subsets of ``range(m)`` as an ascending ``(C(m, r), r)`` array, lexicographic."""
    count = math.comb(m, r)
    flat = itertools.chain.from_iterable(itertools.combinations(range(m), r))
    return np.fromiter(flat, dtype=np.int64, count=count * r).reshape(count, r)


def _chunks(m: int, r: int, limit: int) -> Iterator[np.ndarray]:
    """Lexicographic ``r``-subsets of ``range(m)`` in arrays of at most about ``limit`` rows."""

    def rec(prefix: tuple[int, ...], start: int, r_left: int) -> Iterator[np.ndarray]:
        if r_left == 0:
            yield np.array([prefix], dtype=np.int64)
            return
        if math.comb(m - start, r_left) <= limit or r_left == 1:
            tail = _combinations(m - start, r_left) + start
            head = np.broadcast_to(np.array(prefix, np.int64), (tail.shape[0], len(prefix)))
            yield np.hstack([head, tail])
            return
        for first in range(start, m - r_left + 1):
            yield from rec(prefix + (first,), first + 1, r_left - 1)

    yield from rec((), 0, r)


@lru_cache(maxsize=32)
def _half_lattice_levels(k: int, h_max: int) -> tuple[np.ndarray, ...]:
    """Points of ``Z^k`` by ``L1`` norm ``0..h_max``, one of each pair ``{x, -x}`` (int64).

    A point is kept when its first non-zero coordinate is positive (the origin is kept), so
    level ``h >= 1`` holds ``L(k, h) / 2`` points.
    """
    pts = np.zeros((1, 0), dtype=np.int64)
    norms = np.zeros(1, dtype=np.int64)
    for _ in range(k):
        t = np.arange(-h_max, h_max + 1, dtype=np.int64)
        new_norms = norms[:, None] + np.abs(t)[None, :]
        rows, cols = np.nonzero(new_norms <= h_max)
        pts = np.hstack([pts[rows], t[cols][:, None]])
        norms = new_norms[rows, cols]
    nz = pts != 0
    first = pts[np.arange(pts.shape[0]), np.argmax(nz, axis=1)]
    keep = (first > 0) | ~nz.any(axis=1)
    pts, norms = pts[keep], norms[keep]
    return tuple(np.ascontiguousarray(pts[norms == h]) for h in range(h_max + 1))


@lru_cache(maxsize=16)
def _fold_table(n: int, reach: int) -> np.ndarray:
    """``table[x + reach] = min(x mod n, -x mod n)`` for ``|x| <= reach`` (class of ``x``)."""
    x = np.arange(-reach, reach + 1, dtype=np.int64) % n
    return np.minimum(x, n - x).astype(np.int64)


def _truncated(sets: np.ndarray, n: int, horizon: int) -> np.ndarray:
    """Distances ``min(dist, horizon + 1)`` from node 0 to each class ``{v, -v}``, per row.

    ``sets`` is a ``(B, k)`` array of strides in ``[1, n/2]``; the result is
    ``(B, n // 2 + 1)`` (``int8`` or ``int16``). The images of the lattice points of norm ``h``
    are written in decreasing ``h``, so the smallest norm reaching a class is what stays (one
    write per point, no min-reduction).
    """
    b, k = sets.shape
    m = n // 2 + 1
    dtype = np.int8 if horizon < 120 else np.int16
    dist = np.full((b, m), horizon + 1, dtype=dtype)
    flat = dist.reshape(-1)
    reach = horizon * (n // 2)
    table = _fold_table(n, reach)
    base = (np.arange(b, dtype=np.int64) * m)[:, None]
    cols = [np.ascontiguousarray(sets[:, j : j + 1], dtype=np.int64) for j in range(k)]
    levels = _half_lattice_levels(k, horizon)
    for h in range(horizon, -1, -1):
        pts = levels[h]
        # x = sum_j x_j s_j, one row per set: |x| <= horizon * n/2 (norm h, strides <= n/2)
        x = cols[0] * pts[:, 0] + reach
        for j in range(1, k):
            x += cols[j] * pts[:, j]
        idx = table[x]
        idx += base
        flat[idx.reshape(-1)] = h
    return dist


def _weighted_sum(per_class: np.ndarray, n: int) -> np.ndarray:
    """Row sums over nodes of a per-class ``(B, n // 2 + 1)`` array (classes ``{v, -v}``)."""
    out = 2 * per_class.sum(axis=1, dtype=np.int64) - per_class[:, 0].astype(np.int64)
    if n % 2 == 0:
        out -= per_class[:, n // 2].astype(np.int64)
    return out


def _truncated_bounds(
    sets: np.ndarray, n: int, k: int, horizon: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lower bounds on total distance and diameter of each row's circulant, and exactness.

    Distances up to ``horizon`` are exact; the nodes not reached by then are filled greedily into
    layers ``horizon + 1, ...`` of capacity ``L(k, h)`` (see the module docstring, point 2).
    Rows with every node reached get their exact values (``exact`` true).
    """
    tr = _truncated(sets, n, horizon)
    far = tr > horizon
    unreached = _weighted_sum(far, n)
    total = _weighted_sum(tr, n) - unreached * (horizon + 1)
    extra, diam_fill = _fill_bound(unreached, k, horizon + 1)
    exact = unreached == 0
    diam = np.where(exact, tr.max(axis=1), diam_fill).astype(np.int64)
    return total + extra, diam, exact


def _random_sets(classes: np.ndarray, k: int, count: int, seed: int = 0) -> np.ndarray:
    """``count`` random sets of ``k`` distinct classes, each holding 1, ascending (seeded)."""
    rng = np.random.default_rng(seed)
    rest = classes[1:]
    if count * rest.size > 4_000_000:  # (count, classes) random keys: 1.6 GB at n = 2 * 10^5
        pick = np.array([rng.choice(rest.size, k - 1, replace=False) for _ in range(count)])
        sets = np.hstack([np.ones((count, 1), np.int64), rest[pick.reshape(count, k - 1)]])
        return np.sort(sets, axis=1)
    pick = np.argsort(rng.random((count, rest.size)), axis=1)[:, : k - 1]
    sets = np.hstack([np.ones((count, 1), np.int64), rest[pick]])
    return np.sort(sets, axis=1)


def _first_horizon(objective: str, best_diam: int, lb_diam: int) -> int:
    """First horizon of the cascade of truncated bounds.

    For the diameter, a truncated bound prunes only from ``best_diam - 1`` on (nodes beyond it
    make the diameter at least ``best_diam``); for the mean hop count, two levels below the
    Moore diameter bound already prune most sets at a fraction of the cost.
    """
    if objective == "diameter":
        return max(1, best_diam - 1)
    return max(1, min(best_diam, lb_diam) - 2)


def _not_worse(
    objective: str, total: np.ndarray, diam: np.ndarray, best_total: int, best_diam: int
) -> np.ndarray:
    """Rows whose (lower-bound) key is not worse than the incumbent's, lexicographically."""
    if objective == "mean-hops":
        return (total < best_total) | ((total == best_total) & (diam <= best_diam))
    return (diam < best_diam) | ((diam == best_diam) & (total <= best_total))


def _too_short(n: int, d: int, limit: float | None, step: str) -> InputError:
    """The time limit ran out before a first stride set was evaluated: no answer to give."""
    return InputError(
        "--time-limit",
        limit,
        f"more seconds for n={n:,} and d={d} ({step} did not finish; it visits about "
        f"{n * d // 2:,} node-strides), or a smaller n",
    )


@dataclass(frozen=True)
class StrideResult:
    """Result of :func:`best_strides`.

    Attributes
    ----------
    n, degree : int
        Servers and ports per server (``degree / 2`` strides).
    strides : tuple of int
        The chosen stride classes (ascending, coprime with ``n``; ``+s`` and ``-s`` both wired).
    diameter : int
    mean_hops : float
        Mean hop count over ordered pairs of distinct servers.
    total_distance : int
        Sum of the distances from one server to all others (``mean_hops * (n - 1)``).
    objective : str
        ``"diameter"`` or ``"mean-hops"``.
    status : str
        ``"optimal"`` (search completed: proven), ``"time-limit"`` or ``"set-limit"``
        (``max_sets``).
    lower_bound : float
        Proven lower bound on the objective (diameter or mean hops); equals the optimum value
        when the status is ``"optimal"``.
    evaluated : int
        Canonical stride sets examined.
    wall_s : float
        Seconds spent.
    solver : str
        ``"symmetry-reduced branch-and-bound"``.
    """

    n: int
    degree: int
    strides: tuple[int, ...]
    diameter: int
    mean_hops: float
    total_distance: int
    objective: str
    status: str
    lower_bound: float
    evaluated: int
    wall_s: float
    solver: str = "symmetry-reduced branch-and-bound"
    geometric: tuple = ()
    """TopoOpt's geometric stride set for comparison: ``(strides, diameter, mean_hops)``."""

    @property
    def value(self) -> float:
        """The objective value (diameter or mean hops)."""
        return float(self.diameter) if self.objective == "diameter" else self.mean_hops

    @property
    def gap(self) -> float:
        """Relative gap between the value and the lower bound (0 when optimal)."""
        if self.status == "optimal":
            return 0.0
        return (self.value - self.lower_bound) / self.value if self.value else 0.0

    def to_dict(self) -> dict:
        """Plain JSON-ready dictionary."""
        return {
            "n": self.n,
            "degree": self.degree,
            "strides": list(self.strides),
            "diameter": self.diameter,
            "mean_hops": self.mean_hops,
            "total_distance": self.total_distance,
            "objective": self.objective,
            "status": self.status,
            "lower_bound": self.lower_bound,
            "gap": self.gap,
            "evaluated": self.evaluated,
            "wall_s": self.wall_s,
            "solver": self.solver,
        }


def best_strides(
    n: int,
    d: int,
    objective: str = "mean-hops",
    time_limit_s: float | None = None,
    max_sets: int | None = None,
) -> StrideResult:
    """The best bidirectional circulant on ``n`` servers with ``d`` ports, every stride coprime.

    Exact: symmetry-reduced exhaustive search with lattice lower bounds (see the module
    docstring). The result is proven optimal (status ``"optimal"``) unless ``time_limit_s``
    stops the search first (status ``"time-limit"``: best set found, global lower bound).

    Parameters
    ----------
    n : int
        Servers, ``>= 3``.
    d : int
        Ports per server, even, ``2 <= d <= phi(n)`` (``d/2`` distinct stride classes).
    objective : {"mean-hops", "diameter"}
        Lexicographic: (total distance, diameter) or (diameter, total distance).
    time_limit_s : float, optional
        Wall-clock limit in seconds (default: none, run to proof).
    max_sets : int, optional
        A deterministic limit: the enumeration stops before a chunk of stride sets once it has
        evaluated at least this many (status ``"set-limit"``, the best set found; the same on
        every machine, unlike ``time_limit_s``).

    Returns
    -------
    StrideResult

    Raises
    ------
    InputError
        Bad ``n``, odd or too large ``d``, unknown objective, non-positive time limit.

    Examples
    --------
    >>> r = best_strides(16, 4, "mean-hops")
    >>> r.strides, r.diameter, round(r.mean_hops, 3), r.status
    ((1, 3), 4, 2.133, 'optimal')
    """
    t0 = time.perf_counter()
    n = _check_n(n)
    d = _check_degree(d)
    if objective not in OBJECTIVES:
        raise InputError("objective", objective, f"one of {', '.join(OBJECTIVES)}")
    if time_limit_s is not None and not time_limit_s > 0:
        raise InputError("time_limit_s", time_limit_s, "a positive number of seconds")
    if max_sets is not None and not (isinstance(max_sets, int) and max_sets >= 1):
        raise InputError("max_sets", max_sets, "an integer >= 1")
    k = d // 2
    deadline = None if time_limit_s is None else t0 + time_limit_s
    try:
        classes = _classes(n, deadline)
    except _OutOfTime:
        raise _too_short(n, d, time_limit_s, "listing the stride classes") from None
    if k > classes.size:
        raise InputError(
            "d", d, f"at most {2 * classes.size} ports for n={n} (phi(n)/2 coprime stride classes)"
        )
    n_sets = math.comb(int(classes.size) - 1, k - 1)  # stride 1 in every canonical set
    if time_limit_s is None and n_sets > MAX_SETS_TO_PROOF:
        raise InputError(
            "time_limit_s",
            f"none: about {_approx(n_sets)} stride sets to search to proof (n={n:,}, d={d})",
            f"a proof of at most {MAX_SETS_TO_PROOF:,} sets, else a time limit (--time-limit "
            "SECONDS: the best set found in that time and its gap)",
        )
    lb_diam, lb_mean = moore_lower_bound(n, d)

    def key(total: int, diam: int) -> tuple[int, int]:
        return (total, diam) if objective == "mean-hops" else (diam, total)

    # incumbent: the geometric rule, canonicalised (if its strides are distinct classes)
    # TopoOpt's candidates (every p coprime with n) from the classes: p and n - p
    geo_raw = _geometric(np.concatenate([classes, n - classes[::-1][classes[::-1] * 2 != n]]), k)
    geo = canonical_strides(n, geo_raw)
    if len(geo) < k:
        geo = classes[:k].tolist()
        geo = canonical_strides(n, geo)
    try:
        dist = circulant_distances(n, geo, deadline)
    except _OutOfTime:
        raise _too_short(n, d, time_limit_s, "evaluating the first stride set") from None
    best_set = tuple(geo)
    geo_stats = (tuple(geo_raw), int(dist.max()), float(dist.sum()) / (n - 1))
    # rows of one batch: its distances in memory, its lattice images a fraction of a second
    points = _ball(k, int(dist.max()))
    rows = max(1, min(_BATCH, _BATCH_BYTES // (n // 2 + 1), _BATCH_IMAGES // points))
    bounded = points <= _LATTICE_POINTS  # truncated bounds affordable
    best_key = key(int(dist.sum()), int(dist.max()))
    best_diam, best_total = int(dist.max()), int(dist.sum())

    # a better start: the best of a seeded random sample of stride sets (deterministic)
    def out_of_time() -> bool:
        return time_limit_s is not None and time.perf_counter() - t0 > time_limit_s

    if k > 1 and classes.size > k and bounded:
        sample_all = _random_sets(classes, k, _SAMPLE)
        horizon0 = best_diam  # the same horizon for every slice (as for the whole sample)
        # in slices, so that a time limit also stops the start (many ports: costly bounds)
        for lo in range(0, sample_all.shape[0], min(_SAMPLE_SLICE, rows)):
            if out_of_time():
                break
            sample = sample_all[lo : lo + min(_SAMPLE_SLICE, rows)]
            tot, dia, exact = _truncated_bounds(sample, n, k, horizon0)
            for i in np.flatnonzero(exact).tolist():
                if key(int(tot[i]), int(dia[i])) < best_key:
                    best_key, best_total, best_diam = (
                        key(int(tot[i]), int(dia[i])),
                        int(tot[i]),
                        int(dia[i]),
                    )
                    best_set = tuple(canonical_strides(n, sample[i].tolist()))

    evaluated = 0
    status = "optimal"
    rest = classes[1:]  # stride 1 is in every canonical set
    for chunk in _chunks(rest.size, k - 1, 50 * _BATCH):
        if max_sets is not None and evaluated >= max_sets:
            status = "set-limit"
            break
        if out_of_time():
            status = "time-limit"
            break
        sets = np.hstack([np.ones((chunk.shape[0], 1), np.int64), rest[chunk]])
        sets = sets[_canonical_mask(sets, n)]
        evaluated += sets.shape[0]
        for lo in range(0, sets.shape[0], rows):
            if out_of_time():  # checked per batch too: one chunk is 50 batches
                status = "time-limit"
                break
            batch = sets[lo : lo + rows]
            exact = np.zeros(batch.shape[0], bool)
            total_lb = diam_lb = exact  # (no bound: every set of the batch by BFS)
            # cascade of horizons: cheap loose bounds first, the incumbent's diameter last
            first_h = _first_horizon(objective, best_diam, lb_diam)
            for horizon in range(first_h, best_diam + 1 if bounded else first_h):
                total_lb, diam_lb, exact = _truncated_bounds(batch, n, k, horizon)
                ok = _not_worse(objective, total_lb, diam_lb, best_total, best_diam)
                batch, total_lb, diam_lb, exact = batch[ok], total_lb[ok], diam_lb[ok], exact[ok]
                if batch.shape[0] == 0:
                    break
            for i in range(batch.shape[0]):
                s = tuple(int(x) for x in batch[i])
                if exact[i]:
                    tot_i, dia_i = int(total_lb[i]), int(diam_lb[i])
                else:
                    try:
                        di = circulant_distances(n, s, deadline)
                    except _OutOfTime:
                        status = "time-limit"
                        break
                    tot_i, dia_i = int(di.sum()), int(di.max())
                cand = key(tot_i, dia_i)
                if cand < best_key or (cand == best_key and s < best_set):
                    best_key, best_set = cand, s
                    best_total, best_diam = tot_i, dia_i
    lower = (
        (float(best_diam) if objective == "diameter" else best_total / (n - 1))
        if status == "optimal"
        else (float(lb_diam) if objective == "diameter" else lb_mean)
    )
    return StrideResult(
        n=n,
        degree=d,
        strides=best_set,
        diameter=best_diam,
        mean_hops=best_total / (n - 1),
        total_distance=best_total,
        objective=objective,
        status=status,
        lower_bound=lower,
        evaluated=evaluated,
        wall_s=time.perf_counter() - t0,
        geometric=geo_stats,
    )
