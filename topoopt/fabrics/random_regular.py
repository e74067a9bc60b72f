"""Seeded random ``d``-regular simple connected graphs in vectorised numpy (any admitted size).

The pairing (configuration) model with a vectorised repair: the ``n * d`` port stubs are
shuffled and paired; a pair that is a self-loop or repeats an earlier pair is *bad*. Every round,
each bad pair ``(a, b)`` is offered a distinct random good pair ``(c, e)`` and the two are
switched to ``(a, c), (b, e)`` (or ``(a, e), (b, c)``, a coin), which keeps every degree. A switch
is accepted only when both new pairs are neither loops nor present in the current edge set nor
made twice in the round, so the bad count never grows and, at edge density at most 1/2 (denser
requests are drawn as the complement of an ``(n - 1 - d)``-regular graph), at least about a
quarter of the offers succeed each round. Sparse graphs have few bad pairs (about
``(d - 1) / 2`` loops and ``(d - 1)^2 / 4`` repeats in expectation, whatever ``n``), so a handful
of ``O(n d log(n d))`` rounds finish the draw. ``d = 2``: a random Hamiltonian cycle (a random
2-regular graph of many servers is almost never one cycle). A draw that is not connected is
redrawn from the same random stream.

The result is deterministic for a seed but *not exactly uniform* over the d-regular graphs (the
repair switchings are not weighted as McKay-Wormald's are); for a baseline expander what matters
is that it is regular, simple, connected and random-looking, which the tests check.
"""

from __future__ import annotations

import numpy as np

from traffic.errors import InputError

__all__ = ["random_regular_edges", "is_connected", "MAX_ROUNDS", "MAX_DRAWS"]

MAX_ROUNDS = 200
"""Repair rounds of one pairing before it is drawn again."""

MAX_DRAWS = 20
"""Pairings drawn (each repaired, then checked connected) before the request is refused."""


def is_connected(n: int, u: np.ndarray, v: np.ndarray) -> bool:
    """Whether the graph of edges ``(u[i], v[i])`` over nodes ``0..n-1`` is connected."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    if n <= 1:
        return True
    a = coo_matrix((np.ones(len(u), np.int8), (u, v)), shape=(n, n)).tocsr()
    k, _ = connected_components(a, directed=False)
    return k == 1


def _present(sorted_keys: np.ndarray, k: np.ndarray) -> np.ndarray:
    i = np.minimum(np.searchsorted(sorted_keys, k), len(sorted_keys) - 1)
    return sorted_keys[i] == k


def _repair(n: int, u: np.ndarray, v: np.ndarray, rng: np.random.Generator) -> bool:
    """Switch bad pairs away in place (module docstring); True when the pairing is simple."""
    for _ in range(MAX_ROUNDS):
        lo, hi = np.minimum(u, v), np.maximum(u, v)
        key = lo * n + hi
        order = np.argsort(key, kind="stable")
        ks = key[order]
        bad = u == v
        bad[order[1:][ks[1:] == ks[:-1]]] = True  # every repeat after its first occurrence
        bi = np.flatnonzero(bad)
        if bi.size == 0:
            return True
        good = np.flatnonzero(~bad)
        if good.size < bi.size:
            return False
        pi = rng.choice(good, size=bi.size, replace=False)
        a, b, c, e = u[bi], v[bi], u[pi], v[pi]
        flip = rng.random(bi.size) < 0.5
        c, e = np.where(flip, e, c), np.where(flip, c, e)
        k1 = np.minimum(a, c) * n + np.maximum(a, c)
        k2 = np.minimum(b, e) * n + np.maximum(b, e)
        ok = (a != c) & (b != e) & (k1 != k2) & ~_present(ks, k1) & ~_present(ks, k2)
        # two accepted switches must not make the same new pair
        new = np.concatenate([k1, k2])
        owner = np.concatenate([np.arange(bi.size), np.arange(bi.size)])
        cand = np.concatenate([ok, ok])
        nk, no = new[cand], owner[cand]
        o = np.argsort(nk, kind="stable")
        nks, nos = nk[o], no[o]
        clash = np.zeros(bi.size, bool)
        same = nks[1:] == nks[:-1]
        clash[nos[1:][same]] = True
        clash[nos[:-1][same]] = True
        ok &= ~clash
        u[bi[ok]], v[bi[ok]] = a[ok], c[ok]
        u[pi[ok]], v[pi[ok]] = b[ok], e[ok]
    return False


def _pairing(n: int, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
    stubs = rng.permutation(np.repeat(np.arange(n, dtype=np.int64), d))
    u, v = stubs[0::2].copy(), stubs[1::2].copy()
    return (u, v) if _repair(n, u, v, rng) else None


def _complement(n: int, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    iu, iv = np.triu_indices(n, k=1)
    keep = np.ones(len(iu), bool)
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    # index of pair (i, j), i < j, in triu order: i * n - i * (i + 1) / 2 + (j - i - 1)
    keep[lo * n - lo * (lo + 1) // 2 + (hi - lo - 1)] = False
    return iu[keep].astype(np.int64), iv[keep].astype(np.int64)


def random_regular_edges(servers: int, degree: int, seed: int) -> np.ndarray:
    """A seeded random ``degree``-regular simple connected graph as ``(m, 2)`` rows ``u < v``.

    Parameters
    ----------
    servers, degree : int
        ``n`` nodes of degree ``d``: ``1 <= d < n``, ``n * d`` even; ``d = 1`` only for ``n = 2``
        (a perfect matching of more nodes is never connected).
    seed : int
        Seed of :func:`numpy.random.default_rng`; the same seed gives the same rows.

    Returns
    -------
    numpy.ndarray
        ``n * d / 2`` rows, sorted.

    Raises
    ------
    InputError
        ``d = 1`` with ``n > 2``, or no connected simple draw in :data:`MAX_DRAWS` pairings.

    Examples
    --------
    >>> e = random_regular_edges(10, 3, seed=0)
    >>> e.shape, np.bincount(e.ravel(), minlength=10).tolist()
    ((15, 2), [3, 3, 3, 3, 3, 3, 3, 3, 3, 3])
    """
    n, d = int(servers), int(degree)
    if not (1 <= d < n) or (n * d) % 2:
        raise InputError("degree", d, f"in [1, {n - 1}] with servers ({n}) * degree even")
    rng = np.random.default_rng(seed)
    if d == 1 and n > 2:
        raise InputError(
            "degree", d, f"at least 2 for {n} servers (a perfect matching is not connected)"
        )
    if d == n - 1 or d == 1:
        u, v = np.triu_indices(n, k=1)
        return np.column_stack([u, v]).astype(np.int64)
    if d == 2:
        p = rng.permutation(n).astype(np.int64)
        u, v = p, np.roll(p, -1)
    else:
        dense = 2 * d > n - 1
        dd = n - 1 - d if dense else d
        for _ in range(MAX_DRAWS):
            if dd == 0:
                drawn: tuple | None = (np.zeros(0, np.int64), np.zeros(0, np.int64))
            else:
                drawn = _pairing(n, dd, rng)
            if drawn is None:
                continue
            u, v = _complement(n, *drawn) if dense else drawn
            if is_connected(n, u, v):
                break
        else:
            raise InputError(
                "degree",
                d,
                f"a degree with a connected simple {d}-regular graph on {n} servers found in "
                f"{MAX_DRAWS} draws (seed {seed})",
            )
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    key = lo * n + hi
    key.sort()
    return np.column_stack([key // n, key % n])
