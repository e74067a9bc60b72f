"""Maximum-cardinality matching of a general graph, preferred edges first.

:func:`priority_matching` starts from a greedy matching that takes the edges in the order given
(the preferred ones first) and grows it by augmenting paths (Edmonds' blossom search, one
breadth-first tree from each free vertex, odd cycles shrunk to their base) until none is left,
which makes it a maximum-cardinality matching (Berge). It is the matching of the list edge
colouring's construction (:func:`solvers.model.list_colouring.colour_by_matchings`), where a
weighted blossom (networkx's ``max_weight_matching``) cost seconds per matching at 2,048
servers: the greedy start leaves few free vertices, and a search costs the tree it grows.

The preference is a heuristic, not a weight: among the maximum matchings it is not the heaviest
(an augmenting path may trade a preferred edge for two others), but the greedy start takes the
preferred edges, and each search visits a vertex's edges in the order given.
"""

from __future__ import annotations

import numpy as np

__all__ = ["priority_matching"]


def priority_matching(n: int, a, b) -> np.ndarray:
    """A maximum-cardinality matching of the simple graph on ``n`` vertices with edges
    ``a[j]-b[j]`` (``a != b``, no edge twice), the earlier edges preferred.

    Parameters
    ----------
    n : int
        Vertices ``0..n-1``.
    a, b : array_like of int
        The edges' ends, in order of preference (the first edge the most preferred).

    Returns
    -------
    numpy.ndarray
        ``int64``: the indices ``j`` of the matched edges, ascending. Deterministic.

    Notes
    -----
    Greedy in the given order, then for each vertex still free (in index order) one search for
    an augmenting path (Edmonds 1965): a breadth-first alternating tree, an edge between two
    even vertices of the tree closes an odd cycle (a blossom) whose vertices take the base of
    the cycle and become even. A vertex from which no augmenting path starts never gets one
    later, so one search per free vertex suffices. A search touches only its tree (the
    blossoms keep lists of their vertices, so a shrink costs the blossoms it joins, and the
    vertices made even enter the queue in the tree's order): about the length of the path
    found when the greedy start is near perfect, the whole component when none is found.

    References
    ----------
    J. Edmonds, "Paths, trees, and flowers", Canad. J. Math. 17 (1965) 449-467.

    Examples
    --------
    A path of three edges: greedy takes the middle one, the augmenting path gives both ends.

    >>> priority_matching(4, [1, 0, 2], [2, 1, 3]).tolist()
    [1, 2]
    >>> priority_matching(5, [0, 1, 2, 3, 4], [1, 2, 3, 4, 0]).size  # a pentagon: two edges
    2
    """
    a = np.asarray(a, np.int64).tolist()
    b = np.asarray(b, np.int64).tolist()
    adj: list[list[int]] = [[] for _ in range(n)]
    mate = [-1] * n
    for x, y in zip(a, b, strict=True):
        adj[x].append(y)
        adj[y].append(x)
        if mate[x] < 0 and mate[y] < 0:
            mate[x], mate[y] = y, x
    # search state, reset for the vertices a search touched only
    parent = [-1] * n  # odd vertex -> the even vertex it was reached from
    base = list(range(n))  # the base of a vertex's blossom
    even = [False] * n  # in the tree at even depth (or shrunk into a blossom)
    members = [[z] for z in range(n)]  # the vertices whose base is z
    place = [0] * n  # a vertex's position in the tree's list
    stamp = [0] * n  # ancestor marks of the current step
    tick = 0
    for root in range(n):
        if mate[root] >= 0 or not adj[root]:
            continue
        tree = [root]
        place[root] = 0
        even[root] = True
        queue = [root]
        head = 0
        end = -1
        while head < len(queue) and end < 0:
            x = queue[head]
            head += 1
            for y in adj[x]:
                if base[x] == base[y] or mate[x] == y:
                    continue
                if y == root or (mate[y] >= 0 and parent[mate[y]] >= 0):
                    # x and y both even: an odd cycle, shrunk onto the base it shares
                    tick += 1
                    top = _common_base(x, y, mate, parent, base, stamp, tick)
                    shrunk: list[int] = []
                    _mark_path(x, top, y, mate, parent, base, shrunk)
                    _mark_path(y, top, x, mate, parent, base, shrunk)
                    new = []  # odd vertices of the cycle's blossoms, now even
                    for w in shrunk:  # the blossoms on the cycle join top's
                        if w == top or not members[w]:
                            continue
                        for z in members[w]:
                            base[z] = top
                            if not even[z]:
                                even[z] = True
                                new.append(z)
                        members[top].extend(members[w])
                        members[w] = []
                    queue.extend(sorted(new, key=place.__getitem__))  # in the tree's order
                elif parent[y] < 0:
                    parent[y] = x
                    place[y] = len(tree)
                    tree.append(y)
                    if mate[y] < 0:
                        end = y
                        break
                    z = mate[y]
                    even[z] = True
                    place[z] = len(tree)
                    tree.append(z)
                    queue.append(z)
        if end >= 0:  # flip the path root ... x y
            y = end
            while y >= 0:
                x = parent[y]
                nxt = mate[x]
                mate[y], mate[x] = x, y
                y = nxt
        for z in tree:
            parent[z] = -1
            base[z] = z
            even[z] = False
            members[z] = [z]
    mate_ = np.array(mate, np.int64)
    x = np.flatnonzero(mate_ > np.arange(n))
    a_, b_ = np.array(a, np.int64), np.array(b, np.int64)
    key = np.minimum(a_, b_) * n + np.maximum(a_, b_)
    order = np.argsort(key, kind="stable")
    return np.sort(order[np.searchsorted(key[order], x * n + mate_[x])])


def _common_base(x, y, mate, parent, base, stamp, tick) -> int:
    """The base of the blossom closed by the even-even edge ``x-y``: the first base on ``y``'s
    path to the root that ``x``'s path passes."""
    while True:
        x = base[x]
        stamp[x] = tick
        if mate[x] < 0:
            break
        x = parent[mate[x]]
    while True:
        y = base[y]
        if stamp[y] == tick:
            return y
        y = parent[mate[y]]


def _mark_path(x, top, child, mate, parent, base, shrunk) -> None:
    """Collect the bases from ``x`` up to the blossom's base ``top`` (in ``shrunk``) and point
    their odd vertices back across the closing edge (through ``child``)."""
    while base[x] != top:
        shrunk.append(base[x])
        shrunk.append(base[mate[x]])
        parent[x] = child
        child = mate[x]
        x = parent[mate[x]]
