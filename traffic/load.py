"""One entry point from a user's source to a Workload: plan file, embedded plan, or trace."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path

from traffic.errors import InputError
from traffic.limits import EFFICIENCY_ALLOWED, MIN_EFFICIENCY
from traffic.workload import Workload

__all__ = [
    "load_workload",
    "with_gpu",
    "with_gpus",
    "with_efficiency",
    "check_efficiency",
    "with_settings",
    "TRACE_SUFFIXES",
    "PLAN_SUFFIXES",
]

TRACE_SUFFIXES = (".fbuf",)
PLAN_SUFFIXES = (".yaml", ".yml", ".json")


def load_workload(
    source: str | os.PathLike,
    gpu: str | None = None,
    efficiency: float | None = None,
    settings: Sequence[str] = (),
    gpus: int | None = None,
) -> Workload:
    """Read a Workload from a plan file (YAML/JSON), an embedded plan name, a TopoOpt task graph
    or a folder of Chakra execution traces.

    Parameters
    ----------
    source : str or path
        ``*.yaml``, ``*.yml`` or ``*.json``: a plan file; ``*.fbuf``: a TopoOpt task graph;
        a folder: Chakra traces ``NAME.<rank>.et`` (:func:`traffic.chakra.read_chakra`);
        otherwise the name of an embedded plan (``traffic/plans/NAME.yaml``).
    gpu : str, optional
        A GPU of the hardware catalogue replacing the plan's ``cluster.gpu`` (the GPU's default
        efficiency then applies, the plan's ``cluster.efficiency`` is dropped); a plan only.
    efficiency : float, optional
        The kernel efficiency in [0.001, 1] (a fraction of the GPU's peak FLOP/s), set as the plan's
        ``cluster.efficiency`` after ``gpu`` is applied (:func:`with_efficiency`); a plan only.
    settings : sequence of str
        ``KEY=VALUE`` plan fields set after ``gpu`` and ``efficiency``, as if the file said so
        (:func:`with_settings`, the CLI's ``--set``); a plan only.
    gpus : int, optional
        The plan on this many GPUs (:func:`with_gpus`: servers and ``dp`` re-derived, the
        global batch scaled with ``dp``), after ``gpu`` and ``efficiency`` and before
        ``settings`` (the CLI's ``--gpus``); a plan only.

    Raises
    ------
    InputError
        Unknown plan name, unreadable or malformed file, invalid plan.
    """
    from traffic.build import workload_from_plan
    from traffic.plan import embedded_plan_names, embedded_plan_path, load_plan

    path = Path(source)
    if path.is_dir():
        from traffic.chakra import read_chakra

        _no_gpu(gpu, efficiency, "a Chakra trace folder", settings, gpus)
        return read_chakra(path)
    suffix = path.suffix.lower()
    if suffix in TRACE_SUFFIXES:
        from traffic.taskgraph import read_taskgraph

        _no_gpu(gpu, efficiency, "a task graph", settings, gpus)
        return read_taskgraph(path)
    if suffix in PLAN_SUFFIXES:
        if not path.is_file():
            raise InputError("PLAN", str(source), "an existing plan file")
        plan = with_gpus(with_efficiency(with_gpu(load_plan(path), gpu), efficiency), gpus)
        return workload_from_plan(with_settings(plan, settings))
    if path.exists():
        raise InputError(
            "PLAN", str(source), f"a file ending in {', '.join(PLAN_SUFFIXES + TRACE_SUFFIXES)}"
        )
    names = embedded_plan_names()
    if str(source) not in names:
        raise InputError(
            "PLAN", str(source), f"a plan or .fbuf file, or an embedded plan: {', '.join(names)}"
        )
    plan = with_gpu(load_plan(embedded_plan_path(str(source))), gpu)
    plan = with_gpus(with_efficiency(plan, efficiency), gpus)
    return workload_from_plan(with_settings(plan, settings))


def _no_gpu(
    gpu: str | None, efficiency: float | None, what: str, settings=(), gpus: int | None = None
) -> None:
    for name, value in (("--gpu", gpu), ("--efficiency", efficiency)):
        if value is not None:
            raise InputError(name, value, f"a plan (not {what}: its compute times are its own)")
    if gpus is not None:
        raise InputError("--gpus", gpus, f"a plan (not {what}: its ranks are its own)")
    if settings:
        raise InputError("--set", list(settings)[0], f"a plan (not {what}: it has no plan fields)")


_SECTIONS = ("model", "parallelism", "precision", "cluster", "options")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63}){1,3}")


def with_settings(plan, settings: Sequence[str] = (), field: str = "--set"):
    """``plan`` with fields set from ``KEY=VALUE`` strings (``parallelism.vpp=8``,
    ``parallelism.global_batch_size=2048``, ``model.seq_len=131072``), then validated again as a
    whole, as if the file had said so (a setting that breaks the plan is one line naming the
    field). ``KEY`` is a dotted path below one of the plan's sections (model, parallelism,
    precision, cluster, options); ``VALUE`` is read as a YAML scalar or flow list (``8``,
    ``true``, ``null``, ``[7, 8]``, ``h100-sxm``). The settings apply in order, to the fields
    the plan sets (its defaults still follow from them: ``dp`` from the cluster when the plan
    leaves it out). The plan's name gains the settings (results say what ran).

    >>> from traffic.plan import load_plan
    >>> p = with_settings(load_plan("gpt3-175b"), ["parallelism.vpp=6", "cluster.gpu=h100-sxm"])
    >>> p.parallelism.vpp, p.cluster.gpu, p.source
    (6, 'h100-sxm', 'gpt3-175b.yaml with parallelism.vpp=6 cluster.gpu=h100-sxm')
    >>> with_settings(load_plan("gpt3-175b"), ["parallelism.vp=6"])
    Traceback (most recent call last):
    traffic.errors.InputError: parallelism.vp: got 'vp'; allowed: no such field; known fields: tp, stage_tp, stage_layers, pp, dp, ep, etp, cp, sp, vpp, micro_batch_size, global_batch_size, recompute, zero, fsdp, distributed_optimizer, order
    """  # noqa: E501
    if isinstance(settings, str):
        settings = [settings]
    settings = list(settings or ())
    if not settings:
        return plan
    from traffic.decode import parse_yaml
    from traffic.plan import load_plan

    data = plan.model_dump(exclude_unset=True)
    said = []
    for text in settings:
        if not isinstance(text, str) or "=" not in text:
            raise InputError(field, text, "KEY=VALUE, e.g. parallelism.vpp=8")
        key, raw = (x.strip() for x in text.split("=", 1))
        if not _KEY.fullmatch(key) or key.split(".")[0] not in _SECTIONS:
            raise InputError(
                field, text, f"KEY=VALUE with KEY a dotted field of {', '.join(_SECTIONS)}"
            )
        if len(raw) > 4096 or not raw:
            raise InputError(field, text, "a VALUE of 1 to 4,096 characters")
        value = parse_yaml(raw, f"{field} {key}")
        if isinstance(value, dict):
            raise InputError(field, text, "a scalar or a list VALUE (set nested fields one by one)")
        node = data
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part, {}) if isinstance(node, dict) else None
            if not isinstance(nxt, dict):
                raise InputError(field, text, f"{'.'.join(parts[: i + 1])} to be a mapping")
            node[part] = nxt = dict(nxt)
            node = nxt
        node[parts[-1]] = value
        said.append(f"{key}={raw}")
    out = load_plan(data)
    out._source = f"{plan.source or plan.model.name} with {' '.join(said)}"
    return out


def with_gpus(plan, gpus: int | None, field: str = "--gpus"):
    """``plan`` on ``gpus`` GPUs (None: unchanged): ``servers = gpus / gpus_per_server``, ``dp``
    re-derived from the model-parallel size (``tp * pp * cp``, per-stage ``tp`` summed), and the
    global batch scaled with ``dp`` (weak scaling: every replica keeps its micro-batches). A
    count the plan cannot take (not a multiple of the server or the model-parallel size, expert
    groups that would not tile, a relation the scaled plan breaks) is one line naming ``field``.
    The plan's name says the count.

    >>> from traffic.plan import load_plan
    >>> p = with_gpus(load_plan("gpt3-175b"), 4096)
    >>> p.cluster.servers, p.dp, p.global_batch, p.source
    (512, 32, 6144, 'gpt3-175b.yaml on 4,096 GPUs')
    >>> with_gpus(load_plan("gpt3-175b"), 1000)
    Traceback (most recent call last):
    traffic.errors.InputError: --gpus: got 1000; allowed: a multiple of the model-parallel size 128
    """
    if gpus is None or (isinstance(gpus, int) and not isinstance(gpus, bool) and gpus == plan.gpus):
        return plan  # its own size: the plan as written (its name unchanged)
    from traffic.plan import load_plan

    g = plan.cluster.gpus_per_server
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < g or gpus % g:
        raise InputError(field, gpus, f"a positive multiple of gpus_per_server = {g}")
    par = plan.parallelism
    mp = (sum(par.stage_tp) if par.stage_tp else par.tp * par.pp) * par.cp
    if gpus % mp:
        raise InputError(field, gpus, f"a multiple of the model-parallel size {mp}")
    if plan.model.is_moe and not par.stage_tp:  # the experts' groups (etp * ep ranks) tile
        e = plan.etp * par.ep  # a stage's tp * cp * dp ranks (traffic.plan.check_plan; per-stage
        # tp sizes: the scaled plan's check below): dp a multiple of step
        step = e // math.gcd(e, par.tp * par.cp)
        if (gpus // mp) % step:
            raise InputError(
                field, gpus, f"a multiple of {mp * step} (model-parallel size {mp} x {step}: "
                f"the expert groups, etp*ep = {e}, must tile tp*cp*dp)",
            )  # fmt: skip
    d = plan.model_dump(exclude_unset=True)
    old_dp, new_dp = plan.dp, gpus // mp
    per_replica = plan.global_batch // old_dp
    d["cluster"] = {**d["cluster"], "servers": gpus // g}
    d["parallelism"] = {
        **d.get("parallelism", {}),
        "dp": new_dp,
        "global_batch_size": per_replica * new_dp,
    }
    try:
        out = load_plan(d)
    except InputError as e:  # a relation the scaled plan breaks: the user asked --gpus
        raise InputError(
            field, gpus, f"a GPU count this plan scales to (the scaled plan's {e})"
        ) from None
    out._source = f"{plan.source or plan.model.name} on {gpus:,} GPUs"
    return out


def with_gpu(plan, gpu: str | None, field: str = "--gpu"):
    """``plan`` with ``cluster.gpu`` replaced by the catalogue GPU ``gpu`` (None: unchanged).

    A ``gpu`` naming the plan's own GPU leaves the plan unchanged, its ``cluster.efficiency``
    (a calibration of that GPU) included; another GPU drops it (the catalogue's default
    efficiency of the new GPU applies).

    >>> from traffic.plan import load_plan
    >>> with_gpu(load_plan("gpt3-175b"), "h200").cluster.gpu
    'h200'
    """
    if gpu is None or (isinstance(plan.cluster.gpu, str) and gpu == plan.cluster.gpu):
        return plan
    from traffic.hardware import gpu_spec
    from traffic.plan import Cluster

    gpu_spec(gpu, field)
    c = plan.cluster
    cluster = Cluster(servers=c.servers, gpus_per_server=c.gpus_per_server, gpu=gpu)
    return plan.model_copy(update={"cluster": cluster})


def check_efficiency(efficiency, field: str = "--efficiency") -> float | None:
    """``efficiency`` as a float if it is a fraction in [:data:`~traffic.limits.MIN_EFFICIENCY`,
    1] (None: unchanged), else :class:`InputError` naming ``field``.

    >>> check_efficiency(0.523)
    0.523
    >>> check_efficiency(1.5)
    Traceback (most recent call last):
    traffic.errors.InputError: --efficiency: got 1.5; allowed: a fraction of the GPU's peak FLOP/s in [0.001, 1]
    >>> check_efficiency(1e-300)
    Traceback (most recent call last):
    traffic.errors.InputError: --efficiency: got 1e-300; allowed: a fraction of the GPU's peak FLOP/s in [0.001, 1]
    """  # noqa: E501
    if efficiency is None:
        return None
    e = efficiency
    real = isinstance(e, int | float) and not isinstance(e, bool)
    if not (real and math.isfinite(e) and MIN_EFFICIENCY <= e <= 1):
        raise InputError(field, e, EFFICIENCY_ALLOWED)
    return float(e)


def with_efficiency(plan, efficiency: float | None, field: str = "--efficiency"):
    """``plan`` with ``cluster.efficiency`` set to ``efficiency`` (None: unchanged): the kernel
    efficiency of the roofline (:mod:`topoopt.flowsim.roofline`), of the plan's GPU or, without
    ``cluster.gpu``, of the default A100. Apply it after :func:`with_gpu`, which drops the
    efficiency of a plan whose GPU it replaces.

    >>> from traffic.plan import load_plan
    >>> with_efficiency(with_gpu(load_plan("gpt3-175b"), "h100-sxm"), 0.523).cluster.gpu_spec.efficiency
    0.523
    """  # noqa: E501
    e = check_efficiency(efficiency, field)
    if e is None:
        return plan
    cluster = plan.cluster.model_copy(update={"efficiency": e})
    return plan.model_copy(update={"cluster": cluster})
