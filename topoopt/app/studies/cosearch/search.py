"""Co-search: which plan, on which network (``topoopt cosearch``).

Two searches over a :class:`~topoopt.app.studies.cosearch.space.Space`, both deterministic for a
seed
and independent of the worker count (evaluations go out in batches of a fixed size and come back
keyed by index; every decision reads only finished batches):

``refine`` (ours, the default): bounded successive refinement.
    0. Every candidate gets the bound ``L_c = max(compute-only, ideal-switch)``
       (:func:`.evaluate.compute_bound`, :func:`.evaluate.network_bound`; no simulation), and
       candidates are taken in increasing ``L_c``.
    1. *Ideal switch*: the flow model on one non-blocking switch of ``degree x B`` per server,
       in batches of :data:`BATCH`, until the budget of this level is spent or the next
       candidate's ``L_c`` is no less than the ``K``-th best ideal-switch time found (it cannot
       enter the top ``K``: ``L_c`` bounds its ideal-switch iteration from below). When the
       space is small this is an exhaustive enumeration.
    2. *Cheap topology*: the top ``K`` by ideal-switch time on TopoOpt's TopologyFinder design
       (``topoopt``, one shot), skipping those whose ideal-switch time already exceeds the best
       cheap result.
    3. *Target*: ``F`` finalists (and the reference plan, always) on ``--fabric`` (e.g.
       ``joint``, the expensive optimizer, only for these finalists). The best of them wins.
       For ``joint`` (:data:`UPPER_BOUNDED_BY_CHEAP`: never slower than the cheap level's
       design) they are the best cheap candidate and then the others by ideal-switch time,
       those whose compute-only bound is at least the best cheap time cut (they cannot beat
       it). The ideal-switch time is no bound on ``joint``'s: ``joint`` rewrites collectives
       (Blink tree packings) and gives classes priorities, which can shorten the exposed
       communication (the soak's plan 141: ``joint`` 85.58 ms, the ideal switch with the plan's
       rings 87.93 ms); the compute-only bound holds whatever the network and the collectives.
       TopoOpt's one-shot time is a poor stand-in for ``joint``'s. Other targets: the top ``F``
       of level 2.
    4. *Pareto*: the winner and the reference on the comparison fabrics (capex vs iteration).
    When the target fabric is not designed, level 2 is skipped.

``topoopt-mcmc``: TopoOpt's alternating optimisation (Wang et al., NSDI'23, section 4), faithful
to its published structure: start from the reference plan and the topology designed for it;
then alternate (a) an MCMC search over plans on the *fixed* current topology, with FlexFlow's move
(Jia et al., SysML'19: pick one decision of the current strategy uniformly at random and give it
a random other value; for DLRM, move one embedding table to a random other server) and the
Metropolis acceptance ``min(1, exp(-beta (T' - T) / T))``, :data:`CHAINS` chains in lockstep, and
(b) a new topology designed (by the target fabric's designer) for the best plan found, until a
round brings no improvement or the budget is spent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from topoopt.app.studies.cosearch.checkpoint import task_key
from topoopt.app.studies.cosearch.evaluate import (
    DESIGNED,
    EvalTask,
    compute_bound,
    evaluate,
    network_bound,
    workload_for,
)
from topoopt.app.studies.cosearch.space import Candidate, Space, table_gpus
from topoopt.app.studies.engine import Engine
from traffic.errors import InputError
from traffic.memory import memory_per_gpu

__all__ = [
    "BATCH",
    "CHAINS",
    "METHODS",
    "PARETO_FABRICS",
    "UPPER_BOUNDED_BY_CHEAP",
    "SearchConfig",
    "SearchResult",
    "check_size",
    "check_space",
    "cosearch",
    "pareto_front",
]

BATCH = 8
"""Evaluations per batch of the refinement's first levels (fixed: results never depend on it
matching the worker count)."""

CHAINS = 4
"""Parallel MCMC chains of the TopoOpt baseline."""

METHODS = ("refine", "topoopt-mcmc")

PARETO_FABRICS = ("ideal", "fat-tree", "fat-tree-cost-equivalent", "topoopt", "joint")
"""Fabrics the winner and the reference are also judged on (the Pareto front)."""

UPPER_BOUNDED_BY_CHEAP = ("joint",)
"""Targets never slower than the cheap level's design (``joint`` starts from ``topoopt``): their
finalists are chosen by ideal-switch time, the cheap level only prunes
(:func:`_finalists_by_ideal`)."""

_SCREENING = ("ideal switch", "cheap topology", "mcmc", "mcmc (fixed topology)")
"""Stages that rank candidates (coarsened buckets, :data:`.evaluate.SCREEN_MAX_BUCKETS`); the
target, reference and Pareto evaluations are exact when they fit :data:`.evaluate.MAX_FLOWS`."""

_REL_TOL = 1e-9  # bounds are exact for 1F1B: equal up to rounding is "cannot win"


@dataclass(frozen=True)
class SearchConfig:
    """Settings of :func:`cosearch` (SI units).

    Attributes
    ----------
    fabric : str
        Target fabric the plan is chosen for.
    degree : int
    link_bandwidth : float
        Bytes/s per port.
    max_evaluations : int
        Flow-model evaluations in all (every level, the Pareto fabrics included).
    seed : int
    method : {"refine", "topoopt-mcmc"}
    finalists : int
        ``F``: candidates judged on the target fabric.
    work_limit : float or None
        Work budget of each ``joint`` design (None: the optimizer's default).
    pareto_fabrics : tuple of str
    beta : float
        MCMC inverse temperature on relative time differences.
    """

    fabric: str = "joint"
    degree: int = 8
    link_bandwidth: float = 12.5e9
    max_evaluations: int = 40
    seed: int = 0
    method: str = "refine"
    finalists: int = 3
    work_limit: float | None = None
    pareto_fabrics: tuple[str, ...] = PARETO_FABRICS
    beta: float = 20.0

    def __post_init__(self) -> None:
        from topoopt.app.studies.compare import FABRICS

        if self.fabric not in FABRICS:
            raise InputError("fabric", self.fabric, "one of " + ", ".join(FABRICS))
        for f in self.pareto_fabrics:
            if f not in FABRICS:
                raise InputError("pareto_fabrics", f, "names from " + ", ".join(FABRICS))
        if self.method not in METHODS:
            raise InputError("method", self.method, " or ".join(METHODS))
        if self.max_evaluations < 2:
            raise InputError("max_evaluations", self.max_evaluations, "an integer >= 2")
        if self.degree < 1:
            raise InputError("degree", self.degree, "a positive integer")
        if not self.link_bandwidth > 0:
            raise InputError("link_gbps", self.link_bandwidth, "a positive number")


@dataclass
class SearchResult:
    """Everything :func:`cosearch` found.

    Attributes
    ----------
    records : list of dict
        Every evaluation (:func:`.evaluate.evaluate` records), in index order.
    best : dict
        The winning record on the target fabric.
    reference : dict or None
        The reference plan's record on the target fabric.
    pareto : list of dict
        Non-dominated (iteration_s, capex_usd) records over all fabrics.
    candidates : list of dict
        One row per candidate that was evaluated or cut by a bound, with its fate.
    counts : dict
        Space size, cuts by constraint and by bound, evaluations per level.
    """

    records: list[dict]
    best: dict
    reference: dict | None
    pareto: list[dict]
    candidates: list[dict]
    counts: dict[str, Any] = field(default_factory=dict)
    config: SearchConfig | None = None

    def search_warnings(self) -> list[str]:
        """One line per evaluation whose design search fell back to another objective or was
        cut by the wall clock (its record's ``search_warning``), in index order, each once:
        the same lines whatever the number of workers."""
        out: list[str] = []
        for r in self.records:
            w = r.get("search_warning")
            if w and w not in out:
                out.append(w)
        return out


def pareto_front(records: Sequence[dict]) -> list[dict]:
    """Records no other record beats on both iteration time and capex (sorted by capex).

    >>> pareto_front([{"iteration_s": 2, "capex_usd": 1}, {"iteration_s": 1, "capex_usd": 2},
    ...               {"iteration_s": 3, "capex_usd": 3}])
    [{'iteration_s': 2, 'capex_usd': 1}, {'iteration_s': 1, 'capex_usd': 2}]
    """
    rows = sorted(records, key=lambda r: (r["capex_usd"], r["iteration_s"], r.get("key", "")))
    out, best_t = [], math.inf
    for r in rows:
        if r["iteration_s"] < best_t:
            out.append(r)
            best_t = r["iteration_s"]
    return out


class _Runner:
    """Issues evaluations through the engine, numbering them in issue order."""

    def __init__(self, space: Space, cfg: SearchConfig, engine: Engine, checkpoint=None):
        self.space, self.cfg, self.engine = space, cfg, engine
        self.checkpoint = checkpoint  # .checkpoint.Checkpoint: records on disk as they finish
        self.records: list[dict] = []
        from traffic.limits import memory_budget_bytes

        # the budget holds every worker's evaluation at once (issue 30: two workers at 16,384
        # GPUs each build a large iteration)
        self.memory_share = memory_budget_bytes() / max(1, int(getattr(engine, "workers", 1)))

    @property
    def used(self) -> int:
        return len(self.records)

    def run(self, jobs: list[tuple[Candidate, str, str, Any, bool]], label: str) -> list[dict]:
        tasks = [
            EvalTask(
                self.used + k,
                self.space.base,
                cand,
                fabric,
                self.cfg.degree,
                self.cfg.link_bandwidth,
                seed=self.cfg.seed,
                work_limit=self.cfg.work_limit,
                fixed_design=fixed,
                keep_design=keep,
                stage=stage,
                screening=stage in _SCREENING,
                memory_share_bytes=self.memory_share,
            )
            for k, (cand, fabric, stage, fixed, keep) in enumerate(jobs)
        ]
        ck = self.checkpoint
        if ck is None:
            out = self.engine.map(evaluate, tasks, label=label)
        else:  # the evaluations on file are read, the others run and are saved as they finish
            out = [r for r in (ck.lookup(t) for t in tasks) if r is not None]
            todo = [t for t in tasks if task_key(t) not in ck.done]
            out += self.engine.map(
                evaluate, todo, label=label, on_result=lambda k, r: ck.save(todo[k], r)
            )
        out.sort(key=lambda r: r["index"])
        self.records.extend(out)
        return out


def _by_time(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["iteration_s"], r["key"]))


def _finalists_by_ideal(
    ranked: list[int],
    ideal: dict[int, dict],
    cheap: dict[int, dict],
    best_cheap: int,
    F: int,
    lower: dict[int, float],
) -> tuple[list[int], int]:
    """Level 3's candidates for a target never slower than the cheap level (``joint``): the
    best cheap candidate, then the others by ideal-switch time (a ranking, no bound: the target
    may rewrite the collectives), without those whose ``lower`` (a lower bound on the target's
    time whatever its collectives and priorities: the compute-only bound) is at least the best
    cheap time (they cannot beat the best cheap candidate on the target, which is at most its
    cheap time); returns them (``F`` first) and how many were cut that way.

    Examples
    --------
    Candidate 2's ideal-switch time (4.0) is above the best cheap time (3.0) but its bound
    (2.5) is not: it is kept, candidate 3 (bound 3.0) is cut.

    >>> ideal = {k: {"iteration_s": t} for k, t in enumerate([1.0, 2.0, 4.0, 5.0])}
    >>> cheap = {0: {"iteration_s": 5.0}, 1: {"iteration_s": 3.0}}
    >>> lower = {0: 1.0, 1: 2.0, 2: 2.5, 3: 3.0}
    >>> _finalists_by_ideal([0, 1, 2, 3], ideal, cheap, 1, 3, lower)
    ([0, 1, 2], 1)
    """
    limit = cheap[best_cheap]["iteration_s"]
    keep = [k for k in ranked if k != best_cheap and lower[k] < limit * (1 - _REL_TOL)]
    cut = len(ranked) - 1 - len(keep)
    out = keep[: F - 1] + [best_cheap]
    pos = {k: i for i, k in enumerate(ranked)}
    out.sort(key=lambda k: (ideal[k]["iteration_s"], pos[k]))
    return out, cut


def _refine(space: Space, cfg: SearchConfig, run: _Runner, ref: Candidate | None, bounds):
    E = cfg.max_evaluations
    designed = cfg.fabric in DESIGNED
    F = max(1, min(cfg.finalists, len(space)))
    K = min(len(space), 2 * F) if designed else 0
    n_ref = 1 if ref is not None else 0
    par_fabrics = [f for f in cfg.pareto_fabrics if f != cfg.fabric]
    n_pareto = len(par_fabrics) * (1 + n_ref)
    level1 = E - n_pareto - F - n_ref - K
    if level1 < max(1, F):  # small budgets: drop the Pareto fabrics first, then level 2
        par_fabrics, n_pareto = [], 0
        level1 = E - F - n_ref - K
    if level1 < max(1, F):
        K = 0
        level1 = E - F - n_ref
    level1 = max(1, level1)
    order = sorted(range(len(space)), key=lambda k: (bounds[k], space.candidates[k].key))
    ideal: dict[int, dict] = {}
    pos = 0
    keep_top = max(K, F)
    cut_by_bound = 0
    while pos < len(order) and len(ideal) < level1:
        if len(ideal) >= keep_top:
            kth = _by_time(list(ideal.values()))[keep_top - 1]["iteration_s"]
            if bounds[order[pos]] >= kth * (1 - _REL_TOL):
                cut_by_bound = len(order) - pos
                break
        batch = order[pos : pos + min(BATCH, level1 - len(ideal))]
        pos += len(batch)
        jobs = [(space.candidates[k], "ideal", "ideal switch", None, False) for k in batch]
        for k, r in zip(batch, run.run(jobs, "ideal switch"), strict=True):
            ideal[k] = r
    unexplored = len(order) - pos - cut_by_bound
    ranked = [r["index"] for r in _by_time(list(ideal.values()))]
    idx_to_cand = {r["index"]: k for k, r in ideal.items()}
    finalists = [idx_to_cand[i] for i in ranked]
    cheap: dict[int, dict] = {}
    cut_by_cheap = None
    if K:
        best_cheap = math.inf
        for start in range(0, K, BATCH):
            batch = [
                k
                for k in finalists[start : min(K, start + BATCH)]
                if ideal[k]["iteration_s"] < best_cheap
            ]
            if not batch:
                break
            jobs = [(space.candidates[k], "topoopt", "cheap topology", None, False) for k in batch]
            for k, r in zip(batch, run.run(jobs, "cheap topology"), strict=True):
                cheap[k] = r
            best_cheap = min(r["iteration_s"] for r in cheap.values())
        by_cheap = sorted(cheap, key=lambda k: (cheap[k]["iteration_s"], space.candidates[k].key))
        if cfg.fabric in UPPER_BOUNDED_BY_CHEAP:
            lower = {k: compute_bound(space.plans[k]) for k in finalists}
            finalists, cut_by_cheap = _finalists_by_ideal(
                finalists, ideal, cheap, by_cheap[0], F, lower
            )
        else:
            finalists = by_cheap
    final_idx = finalists[:F]
    jobs = [(space.candidates[k], cfg.fabric, "target", None, True) for k in final_idx]
    if ref is not None:
        jobs.append((ref, cfg.fabric, "reference", None, True))
    outs = run.run(jobs, f"target ({cfg.fabric})")
    target = outs[: len(final_idx)]
    ref_rec = outs[-1] if ref is not None else None
    pool = target + ([ref_rec] if ref_rec is not None else [])
    best = _by_time(pool)[0]
    levels = {"ideal": ideal, "cheap": cheap, "target": dict(zip(final_idx, target, strict=True))}
    counts = {"pruned by bounds": cut_by_bound, "not reached (budget)": unexplored}
    if cut_by_cheap is not None:
        counts["pruned by the cheap level"] = cut_by_cheap
    return best, ref_rec, par_fabrics, levels, counts


def _decisions(c: Candidate) -> dict[str, Any]:
    p = c.par
    p.pop("dp", None)
    p.pop("global_batch_size", None)
    return p


def _neighbours_index(space: Space):
    """For each decision name, map (other decisions) -> candidate indices (FlexFlow's moves)."""
    decs = [_decisions(c) for c in space.candidates]
    names = sorted({k for d in decs for k in d})
    index: dict[str, dict[tuple, list[int]]] = {}
    for name in names:
        groups: dict[tuple, list[int]] = {}
        for k, d in enumerate(decs):
            rest = tuple(sorted((a, b) for a, b in d.items() if a != name))
            groups.setdefault(rest + (("ts", space.candidates[k].table_servers),), []).append(k)
        index[name] = groups
    return decs, names, index


def _propose(space, cur: Candidate, decs, names, index, rng, plans_by_key) -> Candidate | None:
    """One FlexFlow move from ``cur``: a random decision to a random other value."""
    plan = plans_by_key.get(cur.key)
    moves = list(names)
    if cur.table_servers is not None:
        moves.append("table")
    for _ in range(8):
        name = moves[int(rng.integers(len(moves)))]
        if name == "table":
            ts = list(cur.table_servers)
            n = space.plans[0].cluster.servers
            t = int(rng.integers(len(ts)))
            s = int(rng.integers(n - 1))
            ts[t] = s if s < ts[t] else s + 1
            mb = cur.par.get("micro_batch_size")
            new = Candidate(cur.parallelism, tuple(ts), f"b{mb} tables moved by MCMC")
            gps = plan.cluster.gpus_per_server
            mem = memory_per_gpu(plan, table_gpus=table_gpus(new.table_servers, gps))
            if mem.total_bytes <= space.gpu_memory_bytes:
                return new
            continue
        d = {a: b for a, b in _decisions(cur).items() if a != name}
        key = tuple(sorted(d.items())) + (("ts", cur.table_servers),)
        group = [k for k in index[name].get(key, []) if space.candidates[k].key != cur.key]
        if group:
            return space.candidates[group[int(rng.integers(len(group)))]]
    return None


def _mcmc(space: Space, cfg: SearchConfig, run: _Runner, ref: Candidate | None, bounds):
    rng = np.random.default_rng(cfg.seed)
    start = ref
    if start is None:
        start = space.candidates[min(range(len(space)), key=lambda k: (bounds[k], k))]
    plans_by_key = {c.key: p for c, p in zip(space.candidates, space.plans, strict=True)}
    if start.key not in plans_by_key:
        from topoopt.app.studies.cosearch.space import candidate_plan

        plans_by_key[start.key] = candidate_plan(space.base, start)
    decs, names, index = _neighbours_index(space)
    designed = cfg.fabric in DESIGNED
    (cur_rec,) = run.run([(start, cfg.fabric, "reference", None, True)], "topology")
    ref_rec = cur_rec if ref is not None else None
    best_rec, best_cand = cur_rec, start
    design = cur_rec.get("design_object") if designed else None
    rounds = 0
    while run.used < cfg.max_evaluations:
        rounds += 1
        # (a) MCMC on the fixed topology: the chains start at the best plan, scored on that
        # topology the same way as every proposal (the fabric's own routing)
        t_start = best_rec["iteration_s"]
        if designed:
            (r0,) = run.run(
                [(best_cand, cfg.fabric, "mcmc (fixed topology)", design, False)], "mcmc"
            )
            t_start = r0["iteration_s"]
        chains = [(best_cand, t_start)] * CHAINS
        round_best = (t_start, best_cand)
        steps = max(1, (cfg.max_evaluations - run.used - (1 if designed else 0)) // CHAINS)
        steps = min(steps, 4)
        for _ in range(steps):
            props = []
            for cand, _t in chains:
                new = _propose(space, cand, decs, names, index, rng, plans_by_key)
                props.append(new if new is not None else cand)
                if new is not None and new.key not in plans_by_key:
                    plans_by_key[new.key] = plans_by_key[cand.key]
            room = cfg.max_evaluations - run.used - (1 if designed else 0)
            if room <= 0:
                break
            props = props[:room]
            stage = "mcmc (fixed topology)" if designed else "mcmc"
            jobs = [(c, cfg.fabric, stage, design, not designed) for c in props]
            outs = run.run(jobs, "mcmc")
            new_chains = []
            for (cand, t), prop, r in zip(chains, props, outs, strict=False):
                t_new = r["iteration_s"]
                u = rng.random()
                if t_new <= t or u < math.exp(-cfg.beta * (t_new - t) / t):
                    new_chains.append((prop, t_new))
                else:
                    new_chains.append((cand, t))
                if (t_new, prop.key) < (round_best[0], round_best[1].key):
                    round_best = (t_new, prop)
            chains = new_chains + chains[len(new_chains) :]
        if not designed:
            cands = [r for r in run.records if r["stage"] == "mcmc"] + [best_rec]
            best_rec = _by_time(cands)[0]
            break
        # (b) TopologyFinder for the round's best plan
        if round_best[1].key == best_cand.key or run.used >= cfg.max_evaluations:
            break
        (rec,) = run.run([(round_best[1], cfg.fabric, "target", None, True)], "topology")
        if rec["iteration_s"] < best_rec["iteration_s"]:
            best_rec, best_cand = rec, round_best[1]
            design = rec.get("design_object")
        else:
            break
    counts = {"rounds": rounds}
    return best_rec, ref_rec, [], {}, counts


def candidate_bounds(space: Space, config: SearchConfig) -> list[float]:
    """``max(compute-only, ideal-switch)`` lower bound of every candidate's ideal-switch
    iteration (:func:`.evaluate.compute_bound`, :func:`.evaluate.network_bound`), seconds."""
    out = []
    for c, p in zip(space.candidates, space.plans, strict=True):
        _, w = workload_for(space.base, c)
        nb = network_bound(w, config.degree, config.link_bandwidth)
        out.append(max(compute_bound(p), nb))
    return out


def check_space(space: Space) -> None:
    """Refuse a space with no plan (every candidate cut: memory, shape), naming the cuts."""
    if not len(space):
        raise InputError(
            "gpu_memory_gb",
            space.gpu_memory_bytes / 1e9,
            f"room for at least one plan (cut: {space.rejected})",
        )


def check_size(base: dict, cand: Candidate, share: float, reference: bool = False) -> None:
    """Refuse, before any work, a search whose first plan ``cand`` (the reference, else the
    space's first candidate; ``base`` as :attr:`.space.Space.base`) cannot be evaluated even
    coarsened (:data:`.evaluate.SCREEN_MAX_BUCKETS` buckets a channel): more flows than
    :data:`.evaluate.MAX_FLOWS`, or arrays beyond one worker's share of
    ``TOPOOPT_MEMORY_BUDGET_GB`` (``share``, bytes; the estimate of
    :func:`topoopt.flowsim.work.estimate_work` on one path a flow, the least any fabric
    takes)."""
    from topoopt.app.studies.cosearch.evaluate import MAX_FLOWS, SCREEN_MAX_BUCKETS
    from topoopt.flowsim.work import estimate_work

    _, w = workload_for(base, cand)
    est = estimate_work(w, max_buckets=SCREEN_MAX_BUCKETS)
    what = f"one evaluation of {'the reference plan' if reference else 'a plan'}"
    if est.flows > MAX_FLOWS:
        raise InputError(
            "cosearch",
            f"about {est.flows:,} flows for {what} ({est.gpus:,} GPUs, coarsened)",
            f"at most {MAX_FLOWS:,} flows an evaluation (a smaller cluster: --servers, "
            "--gpus-per-server)",
        )
    if est.array_bytes > share:
        raise InputError(
            "cosearch",
            f"about {est.array_bytes / 1e9:.3g} GB of arrays for {what} ({est.gpus:,} GPUs, "
            f"{est.flows:,} flows, coarsened)",
            f"at most {share / 1e9:.3g} GB a worker: TOPOOPT_MEMORY_BUDGET_GB over --workers "
            "(set TOPOOPT_MEMORY_BUDGET_GB to raise it, or fewer --workers)",
        )


def cosearch(
    space: Space,
    config: SearchConfig,
    engine: Engine,
    reference: Candidate | None = None,
    checkpoint=None,
    size_checked: bool = False,
) -> SearchResult:
    """Search ``space`` for the fastest plan on ``config.fabric`` (module docstring).

    Parameters
    ----------
    space : Space
        From :func:`~topoopt.app.studies.cosearch.space.plan_space`.
    config : SearchConfig
    engine : Engine
        Where evaluations run (``Engine(workers=1)``: in-process).
    reference : Candidate, optional
        The hand plan: always judged on the target fabric and the Pareto fabrics, and the
        starting point of ``topoopt-mcmc``.
    checkpoint : .checkpoint.Checkpoint, optional
        Every finished evaluation is appended to it; the evaluations it already holds are read
        instead of run (a resumed search gives the uninterrupted search's result).
    size_checked : bool
        The caller ran :func:`check_size` (the CLI does, before it prints anything).
    """
    check_space(space)
    run = _Runner(space, config, engine, checkpoint)
    if not size_checked:  # before any bound or evaluation
        first = reference if reference is not None else space.candidates[0]
        check_size(space.base, first, run.memory_share, reference is not None)
    bounds = candidate_bounds(space, config)
    if config.method == "refine":
        best, ref_rec, par_fabrics, levels, counts = _refine(space, config, run, reference, bounds)
    else:
        best, ref_rec, par_fabrics, levels, counts = _mcmc(space, config, run, reference, bounds)
    if not math.isfinite(best["iteration_s"]) and best.get("skipped"):
        raise InputError(  # every evaluation too large: no plan was simulated
            "cosearch",
            f"{run.used} evaluations, none simulated (the best: {best['skipped']})",
            "an evaluation within the limits (set TOPOOPT_MEMORY_BUDGET_GB to raise the budget, "
            "which --workers share; fewer --workers or a smaller cluster)",
        )
    # Pareto: the winner (and the reference) on the comparison fabrics
    if par_fabrics:
        cands = [_cand_of(space, best, reference)]
        if ref_rec is not None and ref_rec["key"] != best["key"]:
            cands.append(reference)
        jobs = [(c, f, "pareto", None, False) for c in cands for f in par_fabrics]
        jobs = jobs[: max(0, config.max_evaluations - run.used)]
        if jobs:
            run.run(jobs, "pareto fabrics")
    final = [r for r in run.records if r["stage"] in ("target", "reference", "pareto")]
    if config.method != "refine":
        final = [r for r in run.records if not r.get("fixed_topology")]
    pareto = pareto_front(_dedupe(final))
    rows = _candidate_rows(space, run.records, bounds, best)
    counts.update(
        space=len(space),
        rejected=dict(space.rejected),
        evaluations=run.used,
        per_stage=_count_stages(run.records),
    )
    return SearchResult(run.records, best, ref_rec, pareto, rows, counts, config)


def _cand_of(space: Space, rec: dict, reference: Candidate | None) -> Candidate:
    for c in space.candidates:
        if c.key == rec["key"]:
            return c
    if reference is not None and reference.key == rec["key"]:
        return reference
    raise KeyError(rec["key"])


def _dedupe(records: list[dict]) -> list[dict]:
    seen, out = set(), []
    for r in records:
        k = (r["key"], r["fabric"])
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


def _count_stages(records: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        out[r["stage"]] = out.get(r["stage"], 0) + 1
    return out


def _candidate_rows(space: Space, records: list[dict], bounds, best: dict) -> list[dict]:
    by_key: dict[str, dict] = {}
    bound_of = {c.key: b for c, b in zip(space.candidates, bounds, strict=True)}
    for r in records:
        row = by_key.setdefault(
            r["key"],
            {
                "key": r["key"],
                "label": r["label"],
                "plan": r["plan"],
                "memory_per_gpu_bytes": r["memory_per_gpu_bytes"],
                "compute_bound_s": r["compute_bound_s"],
                "network_bound_s": r.get("network_bound_s"),
            },
        )
        col = {
            "ideal switch": "ideal_s",
            "cheap topology": "topoopt_s",
            "target": "target_s",
            "reference": "target_s",
        }.get(r["stage"])
        if col is not None and not r.get("fixed_topology"):
            row[col] = r["iteration_s"]
        if r.get("fixed_topology"):
            prev = row.get("fixed_topology_s")
            row["fixed_topology_s"] = min(prev, r["iteration_s"]) if prev else r["iteration_s"]
    best_t = best["iteration_s"]
    skipped = {r["key"]: r["skipped"] for r in records if r.get("skipped")}
    out = []
    for row in by_key.values():
        row.setdefault("compute_bound_s", bound_of.get(row["key"], math.nan))
        if row["key"] == best["key"]:
            row["fate"] = "best"
        elif skipped.get(row["key"]):
            row["fate"] = "skipped: " + skipped[row["key"]]
        elif row["compute_bound_s"] >= best_t * (1 - _REL_TOL):
            row["fate"] = "compute: its compute alone is no faster than the best iteration"
        else:
            row["fate"] = "network: slower once its communication is simulated"
        out.append(row)
    out.sort(
        key=lambda r: (
            r.get("target_s", math.inf),
            r.get("topoopt_s", math.inf),
            r.get("ideal_s", math.inf),
            r["key"],
        )
    )
    return out
