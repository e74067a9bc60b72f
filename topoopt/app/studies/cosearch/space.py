"""The plan space of a co-search: every parallelization of one model on one cluster that is valid
and fits in GPU memory.

Decisions (:class:`SpaceOptions` narrows them):

- transformers: ``tp``, ``pp``, ``cp``, ``ep``, ``etp``, ``vpp``, ``micro_batch_size``, sequence
  parallelism ``sp``, the sharding (none, Megatron's distributed optimizer = ZeRO-1, ZeRO-2, FSDP
  ``full_shard`` = ZeRO-3), the activation ``recompute`` and the rank ``order``; ``dp`` follows
  from ``gpus = tp * pp * dp * cp``;
- recommendation models: ``micro_batch_size`` and the embedding-table placement, TopoOpt's DLRM
  strategy: every table lives whole on one server (:func:`table_gpus` spreads a server's tables
  over its GPUs), and the decision is which servers hold which tables;
- data-parallel models: ``micro_batch_size`` and the sharding.

Constraints (one function each, :func:`check_candidate` applies them in this order):

1. divisibility: ``heads``, ``kv_heads`` and ``ffn`` by ``tp``; ``layers`` by ``pp * vpp``;
   ``seq_len`` by ``cp`` (by ``cp * tp`` with SP); ``experts`` by ``ep``; ``etp * ep`` divides the
   ranks of a stage ``tp * cp * dp``; the global batch by ``micro_batch_size * dp``; interleaving
   needs ``pp > 1`` and micro-batches a multiple of ``pp`` (Megatron's interleaved schedule);
   everything else :func:`traffic.plan.check_plan` checks;
2. ``tp <= gpus_per_server`` (``SpaceOptions.tp_within_server``: tensor parallelism on NVLink);
3. memory: :func:`traffic.memory.memory_per_gpu` of the fullest GPU ``<= gpu_memory_bytes``;
4. dominance: among plans equal in every other decision, only the least activation
   recomputation that fits is kept (``none`` before ``selective`` before ``full``): more
   recomputation never shortens an iteration in our iteration model (selective recompute adds no
   FLOPs or traffic there, full recompute a third more backward compute and two more TP
   collectives per layer), so the others cannot win.

:func:`plan_space` generates the surviving candidates from divisor lists; :func:`brute_force_space`
tries every combination of the raw value lists through :func:`traffic.plan.load_plan` (the
reference the tests compare the generator with).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traffic.errors import InputError
from traffic.memory import MemoryReport, memory_per_gpu
from traffic.plan import Plan, load_plan

__all__ = [
    "SHARDINGS",
    "RECOMPUTES",
    "ORDERS",
    "Candidate",
    "SpaceOptions",
    "Space",
    "base_mapping",
    "brute_force_space",
    "candidate_plan",
    "plan_space",
    "table_gpus",
    "table_servers_gpu_round_robin",
    "table_servers_round_robin",
]

SHARDINGS = ("none", "distributed_optimizer", "zero2", "full_shard")
"""Sharding choices: plain DP, Megatron's distributed optimizer (ZeRO-1), ZeRO-2, FSDP full."""

RECOMPUTES = ("none", "selective", "full")
"""Activation recomputation, in order of cost."""

ORDERS = ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp")
"""Rank orders tried (Megatron-core's default, and DP outermost)."""

_SHARD_FIELDS = {
    "none": {},
    "distributed_optimizer": {"distributed_optimizer": True},
    "zero2": {"zero": 2},
    "full_shard": {"fsdp": "full_shard"},
}


@dataclass(frozen=True)
class SpaceOptions:
    """Which values each decision may take (``None``: every valid value).

    Attributes
    ----------
    tp, pp, cp, vpp, ep, etp : tuple of int or None
    micro_batch_sizes : tuple of int
        Transformers' micro-batch sizes.
    accumulation_steps : tuple of int
        Recommendation and data-parallel models: micro-batches per iteration (the micro-batch
        size is the global batch over GPUs times this).
    shardings : tuple of str
        Subset of :data:`SHARDINGS`.
    recomputes : tuple of str
        Subset of :data:`RECOMPUTES`.
    sequence_parallel : tuple of bool
        SP choices (only ``tp > 1`` plans take ``True``).
    orders : tuple of str
    tp_within_server : bool
        Keep ``tp <= gpus_per_server``.
    max_cp, max_vpp : int
        Largest context-parallel and interleaving degrees tried when ``cp`` / ``vpp`` is None.
    table_server_counts : tuple of int or None
        Recommendation models: numbers of servers holding tables (None: every divisor of the
        server count that can hold the tables).
    least_recompute : bool
        Apply the dominance rule (module docstring, constraint 4).
    """

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    cp: tuple[int, ...] | None = None
    vpp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    etp: tuple[int, ...] | None = None
    micro_batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    accumulation_steps: tuple[int, ...] = (1, 2, 4)
    shardings: tuple[str, ...] = SHARDINGS
    recomputes: tuple[str, ...] = RECOMPUTES
    sequence_parallel: tuple[bool, ...] = (False, True)
    orders: tuple[str, ...] = ORDERS
    tp_within_server: bool = True
    max_cp: int = 2
    max_vpp: int = 2
    table_server_counts: tuple[int, ...] | None = None
    least_recompute: bool = True

    def __post_init__(self) -> None:
        for s in self.shardings:
            if s not in SHARDINGS:
                raise InputError("shardings", s, ", ".join(SHARDINGS))
        for r in self.recomputes:
            if r not in RECOMPUTES:
                raise InputError("recomputes", r, ", ".join(RECOMPUTES))


@dataclass(frozen=True)
class Candidate:
    """One point of the plan space.

    Attributes
    ----------
    parallelism : tuple of (str, value)
        The plan's ``parallelism`` section, sorted by key (see :meth:`par`).
    table_servers : tuple of int or None
        Recommendation models: the server of every table.
    label : str
        Short human-readable name.
    """

    parallelism: tuple[tuple[str, Any], ...]
    table_servers: tuple[int, ...] | None = None
    label: str = ""

    @property
    def par(self) -> dict[str, Any]:
        """The ``parallelism`` section as a dict."""
        return dict(self.parallelism)

    @property
    def key(self) -> str:
        """Canonical string (sort and deduplication key)."""
        ts = "" if self.table_servers is None else "|" + ",".join(map(str, self.table_servers))
        return ";".join(f"{k}={v}" for k, v in self.parallelism) + ts

    def summary(self) -> dict[str, Any]:
        """The decisions as a flat JSON-ready dict (``sharding`` named as in :data:`SHARDINGS`)."""
        p = self.par
        out = {k: p.get(k) for k in ("tp", "pp", "dp", "cp", "ep", "etp", "vpp")}
        out["micro_batch_size"] = p.get("micro_batch_size")
        out["sp"] = bool(p.get("sp", False))
        out["recompute"] = p.get("recompute", "none")
        out["sharding"] = sharding_name(p)
        out["order"] = p.get("order", ORDERS[0])
        if self.table_servers is not None:
            servers = sorted(set(self.table_servers))
            out["table_servers"] = list(self.table_servers)
            out["table_server_count"] = len(servers)
        return out


def sharding_name(par: Mapping[str, Any]) -> str:
    """Name (:data:`SHARDINGS`) of a parallelism section's sharding fields."""
    if par.get("fsdp"):
        return str(par["fsdp"])
    if par.get("distributed_optimizer"):
        return "distributed_optimizer"
    z = int(par.get("zero", 0) or 0)
    return {0: "none", 1: "zero1", 2: "zero2", 3: "zero3"}[z]


@dataclass
class Space:
    """The generated space: feasible candidates (sorted by key) and what was cut, and why."""

    base: dict[str, Any]
    candidates: list[Candidate]
    plans: list[Plan]
    memory: list[MemoryReport]
    rejected: dict[str, int] = field(default_factory=dict)
    gpu_memory_bytes: float = float("inf")

    def __len__(self) -> int:
        return len(self.candidates)


def base_mapping(plan: Plan) -> dict[str, Any]:
    """The plan's model, precision, options and cluster as a mapping :func:`load_plan` takes."""
    d = plan.model_dump()
    return {k: d[k] for k in ("model", "precision", "options", "cluster")}


def table_gpus(table_servers: Sequence[int], gpus_per_server: int) -> np.ndarray:
    """GPU of every table: a server's tables go round-robin over its GPUs, in table order.

    >>> table_gpus([0, 0, 1, 0], 2).tolist()
    [0, 1, 2, 0]
    """
    ts = np.asarray(table_servers, dtype=np.int64)
    out = np.empty_like(ts)
    seen: dict[int, int] = {}
    for k, s in enumerate(ts.tolist()):
        j = seen.get(s, 0)
        out[k] = s * gpus_per_server + j % gpus_per_server
        seen[s] = j + 1
    return out


def table_servers_round_robin(tables: int, servers: int, holders: int) -> tuple[int, ...]:
    """Tables dealt round-robin over ``holders`` evenly spaced servers (TopoOpt's DLRM layout).

    >>> table_servers_round_robin(6, 8, 2)
    (0, 4, 0, 4, 0, 4)
    """
    step = servers // holders
    return tuple(int((k % holders) * step) for k in range(tables))


def table_servers_gpu_round_robin(tables: int, gpus: int, gpus_per_server: int):
    """Servers of :mod:`traffic.models.recsys`'s default layout (table ``k`` on GPU ``k mod N``).

    With :func:`table_gpus` this gives back exactly that layout.

    >>> table_servers_gpu_round_robin(5, 4, 2)
    (0, 0, 1, 1, 0)
    >>> table_gpus(table_servers_gpu_round_robin(5, 4, 2), 2).tolist()
    [0, 1, 2, 3, 0]
    """
    return tuple(int((k % gpus) // gpus_per_server) for k in range(tables))


def candidate_plan(base: Mapping[str, Any], cand: Candidate) -> Plan:
    """Validated :class:`Plan` of a candidate (raises :class:`InputError` when invalid)."""
    return load_plan({**base, "parallelism": cand.par})


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _memory(plan: Plan, cand: Candidate) -> MemoryReport:
    tg = None
    if cand.table_servers is not None:
        tg = table_gpus(cand.table_servers, plan.cluster.gpus_per_server)
    return memory_per_gpu(plan, table_gpus=tg)


def _transformer_raw(base: Mapping[str, Any], opts: SpaceOptions, plan0: Plan, smart: bool):
    """Parallelism dicts to try: divisor-based (``smart``) or every raw combination."""
    m = plan0.model
    gpus = plan0.gpus
    gb = int(plan0.model.global_batch)
    gps = plan0.cluster.gpus_per_server
    divs = _divisors(gpus)
    tps = opts.tp or [t for t in divs if (not opts.tp_within_server or t <= gps)]
    pps = opts.pp or divs
    cps = opts.cp or [c for c in divs if c <= opts.max_cp]
    vpps = opts.vpp or list(range(1, opts.max_vpp + 1))
    eps = opts.ep or ([e for e in divs if e <= m.experts] if m.is_moe else [1])
    etps = opts.etp or ([1] if not m.is_moe else sorted({1, *tps}))
    if smart:
        tps = [t for t in tps if m.heads % t == 0 and m.kv_heads % t == 0 and m.ffn % t == 0]
        pps = [p for p in pps if m.layers % p == 0]
        cps = [c for c in cps if m.seq_len % c == 0]
        eps = [e for e in eps if m.experts % e == 0]
    for t, p, cp in itertools.product(tps, pps, cps):
        if gpus % (t * p * cp):
            continue
        d = gpus // (t * p * cp)
        for v, e, et, b in itertools.product(vpps, eps, etps, opts.micro_batch_sizes):
            if smart:
                if m.layers % (p * v) or (v > 1 and p == 1) or gb % (b * d):
                    continue
                if v > 1 and (gb // (b * d)) % p:
                    continue
                if m.is_moe and (t * cp * d) % (e * et):
                    continue
            for sp, sh, rc, order in itertools.product(
                opts.sequence_parallel, opts.shardings, opts.recomputes, opts.orders
            ):
                if sp and t == 1:
                    continue
                if smart and sp and (m.seq_len // cp) % t:
                    continue
                par = {"tp": t, "pp": p, "dp": d, "cp": cp, "vpp": v, "micro_batch_size": b}
                par.update(global_batch_size=gb, sp=sp, recompute=rc, order=order)
                if m.is_moe:
                    par.update(ep=e, etp=et)
                par.update(_SHARD_FIELDS[sh])
                yield par, None, None


def _simple_raw(base: Mapping[str, Any], opts: SpaceOptions, plan0: Plan, smart: bool):
    m = plan0.model
    gpus, gb = plan0.gpus, int(plan0.model.global_batch)
    n, gps = plan0.cluster.servers, plan0.cluster.gpus_per_server
    placements: list[tuple[tuple[int, ...] | None, str | None]] = [(None, None)]
    if m.kind == "recsys":
        tables = sum(t.count for t in m.tables)
        counts = opts.table_server_counts or _divisors(n)
        placements = [(table_servers_gpu_round_robin(tables, gpus, gps), "round-robin over GPUs")]
        placements += [
            (table_servers_round_robin(tables, n, k), None) for k in counts if n % k == 0
        ]
    shardings = ["none"] if m.kind == "recsys" else list(opts.shardings)
    sizes = sorted({gb // (gpus * k) for k in opts.accumulation_steps if gb // (gpus * k) > 0})
    for b, (ts, pname), sh in itertools.product(sizes, placements, shardings):
        if smart and gb % (b * gpus):
            continue
        par = {"dp": gpus, "micro_batch_size": b, "global_batch_size": gb}
        par.update(_SHARD_FIELDS[sh])
        yield par, ts, pname


def _label(par: Mapping[str, Any], ts, placement: str | None = None) -> str:
    if ts is not None:
        how = placement or f"round-robin on {len(set(ts))} servers"
        return f"b{par['micro_batch_size']} tables {how}"
    if "tp" not in par:  # a data-parallel model without tables (VGG, ResNet): dp and batch
        extras = [f"dp{par['dp']}", f"b{par['micro_batch_size']}"]
        sh = sharding_name(par)
        return " ".join([*extras, sh] if sh != "none" else extras)
    keys = ("tp", "pp", "dp", "cp", "ep", "vpp")
    shown = [k for k in keys if k in par and (k in ("tp", "pp", "dp") or par[k] > 1)]
    s = " ".join(f"{k}{par[k]}" for k in shown)
    extras = [f"b{par['micro_batch_size']}"]
    if par.get("sp"):
        extras.append("sp")
    if par.get("recompute", "none") != "none":
        extras.append(f"rc-{par['recompute']}")
    sh = sharding_name(par)
    if sh != "none":
        extras.append(sh)
    if par.get("order", ORDERS[0]) != ORDERS[0]:
        extras.append("dp-outer")
    return " ".join([s, *extras]) if s else " ".join(extras)


def _make(par: Mapping[str, Any], ts, placement: str | None = None) -> Candidate:
    return Candidate(tuple(sorted(par.items())), ts, _label(par, ts, placement))


def _dominance_key(c: Candidate) -> str:
    p = dict(c.parallelism)
    p.pop("recompute", None)
    return Candidate(tuple(sorted(p.items())), c.table_servers).key


def _apply_dominance(items: list[tuple[Candidate, Plan, MemoryReport]]):
    rank = {r: k for k, r in enumerate(RECOMPUTES)}
    best: dict[str, int] = {}
    for c, _, _ in items:
        k = _dominance_key(c)
        r = rank[c.par.get("recompute", "none")]
        best[k] = min(best.get(k, r), r)
    keep = [
        it
        for it in items
        if rank[it[0].par.get("recompute", "none")] == best[_dominance_key(it[0])]
    ]
    return keep, len(items) - len(keep)


def _build(base, opts, gpu_memory_bytes, smart: bool) -> Space:
    plan0 = load_plan(_probe(base))
    if not plan0.model.global_batch:
        raise InputError("model.global_batch", None, "a positive integer (the global batch)")
    raw = _transformer_raw if plan0.model.kind == "transformer" else _simple_raw
    rejected = dict.fromkeys(
        ("invalid", "nothing to shard", "tp across servers", "memory", "dominated"), 0
    )
    seen: set[str] = set()
    items = []
    for par, ts, pname in raw(base, opts, plan0, smart):
        cand = _make(par, ts, pname)
        if cand.key in seen:
            continue
        seen.add(cand.key)
        try:
            plan = candidate_plan(base, cand)
        except InputError:
            rejected["invalid"] += 1
            continue
        if plan.parallelism.vpp > 1 and plan.micro_batches % plan.parallelism.pp:
            rejected["invalid"] += 1
            continue
        sharded = sharding_name(plan.parallelism.model_dump()) != "none"
        if sharded and plan.dp * plan.parallelism.cp == 1:
            rejected["nothing to shard"] += 1
            continue
        if opts.tp_within_server and plan.parallelism.tp > plan.cluster.gpus_per_server:
            rejected["tp across servers"] += 1
            continue
        mem = _memory(plan, cand)
        if mem.total_bytes > gpu_memory_bytes:
            rejected["memory"] += 1
            continue
        items.append((cand, plan, mem))
    if opts.least_recompute:
        items, rejected["dominated"] = _apply_dominance(items)
    items.sort(key=lambda it: it[0].key)
    return Space(
        dict(base),
        [c for c, _, _ in items],
        [p for _, p, _ in items],
        [m for _, _, m in items],
        rejected,
        float(gpu_memory_bytes),
    )


def _probe(base: Mapping[str, Any]) -> dict[str, Any]:
    """A plan of the base model that always validates (for the model's shape and batch)."""
    cl = base["cluster"]
    gpus = int(cl["servers"]) * int(cl["gpus_per_server"])
    return {**base, "parallelism": {"dp": gpus, "micro_batch_size": 1, "global_batch_size": gpus}}


def plan_space(
    base: Plan | Mapping[str, Any],
    gpu_memory_bytes: float,
    options: SpaceOptions | None = None,
) -> Space:
    """Every valid plan of ``base``'s model and cluster that fits ``gpu_memory_bytes`` per GPU.

    Parameters
    ----------
    base : Plan or Mapping
        Gives the model, precision, options, cluster and global batch (its parallelism is
        otherwise ignored).
    gpu_memory_bytes : float
        Memory of one GPU.
    options : SpaceOptions, optional

    Returns
    -------
    Space
        Candidates sorted by :attr:`Candidate.key`, their plans and memory reports, and the
        number cut by each constraint.

    Examples
    --------
    >>> from traffic.plan import load_plan
    >>> base = load_plan({"model": {"layers": 4, "hidden": 64, "heads": 4, "vocab": 128,
    ...     "seq_len": 32}, "parallelism": {"global_batch_size": 8},
    ...     "cluster": {"servers": 2, "gpus_per_server": 2}})
    >>> sp = plan_space(base, 80e9, SpaceOptions(orders=("tp-cp-ep-dp-pp",), max_cp=1))
    >>> len(sp), sorted({c.par["tp"] for c in sp.candidates})
    (70, [1, 2])
    """
    if isinstance(base, Plan):
        gb = base.global_batch
        base = base_mapping(base)
        base["model"] = {**base["model"], "global_batch": gb}
    if not (gpu_memory_bytes > 0):
        raise InputError("gpu_memory_gb", gpu_memory_bytes, "a positive number")
    return _build(dict(base), options or SpaceOptions(), gpu_memory_bytes, smart=True)


def brute_force_space(
    base: Mapping[str, Any], gpu_memory_bytes: float, options: SpaceOptions | None = None
) -> Space:
    """The same space by trying every raw combination through :func:`load_plan` (slow; tests)."""
    return _build(dict(base), options or SpaceOptions(), gpu_memory_bytes, smart=False)
