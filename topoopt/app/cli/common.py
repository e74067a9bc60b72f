"""Shared behaviour of every CLI command: one-line errors with exit code 2, JSON on stdout,
progress on stderr, atomic output files."""

from __future__ import annotations

import enum
import functools
import io
import json
import math
import os
import re
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from topoopt.app.cli.choices import Preset
from topoopt.app.cli.option_text import OUTPUT_PARAMETERS, OUTPUT_TEXT
from topoopt.atomic import atomic_write_text, atomic_write_with, check_writable
from traffic.errors import InputError, check_finite
from traffic.limits import (
    EFFICIENCY_ALLOWED,
    MIN_EFFICIENCY,
    check_server_ports,
    check_time_limit,
    check_work_limit,
)

__all__ = [
    "command_started",
    "mark_process_start",
    "DEFAULT_DEGREE",
    "DEFAULT_LINK_GBPS",
    "DEFAULT_SEED",
    "DEFAULT_TIME_LIMIT_S",
    "PROGRESS_EVERY_S",
    "PlainProgress",
    "CommandProgress",
    "command_progress",
    "given_options",
    "GpuOption",
    "GpusOption",
    "WorkLimitOption",
    "EfficiencyOption",
    "nic_hint",
    "OcsLayoutKind",
    "PriorityOption",
    "ReductionOption",
    "RoundingCheckOption",
    "SplitAllreduceOption",
    "handle_errors",
    "check_edge_units",
    "emit_json",
    "json_envelope",
    "CLOCK_FIELDS",
    "set_timings",
    "without_clock",
    "warn_line",
    "warnings_said",
    "to_jsonable",
    "stdout",
    "stderr",
    "prepare_output",
    "check_not_an_input",
    "parse_name_list",
    "write_output_text",
    "write_output_with",
    "write_output_json",
    "dumps_strict",
]


class OcsLayoutKind(enum.StrEnum):
    """``--ocs-layout`` of ``design`` and ``compare`` (``topoopt.fabrics.ocs_layout.LAYOUTS``)."""

    per_rail = "per-rail"
    packed = "packed"


DEFAULT_DEGREE = 8
"""``--degree``: network ports per server, in every command that takes it."""

DEFAULT_LINK_GBPS = 100.0
"""``--link-gbps``: bandwidth of one port, Gbps."""

DEFAULT_SEED = 0
"""``--seed``: the seed of every random choice."""

DEFAULT_TIME_LIMIT_S = 900.0
"""``--time-limit``: the wall-clock safety cap of a design search, seconds. Searches stop on their
deterministic work limits first; the cap only cuts a search on a machine much slower than
expected (the result then says ``deterministic: false``)."""

PriorityOption = Annotated[
    str | None,
    typer.Option(help="Traffic classes first served, highest first (e.g. ep or ep,tp)"),
]
"""``--priority`` of ``simulate`` and ``compare`` (:mod:`topoopt.flowsim.priorities`)."""

SplitAllreduceOption = Annotated[
    str | None,
    typer.Option(
        metavar="SIZE",
        help="Split every gradient all-reduce flow into micro-ops of at most SIZE: bytes (4e6) "
        "or with a suffix (4MiB, 10GB)",
    ),
]
"""``--split-allreduce`` of ``simulate`` and ``compare``: a size for
:func:`topoopt.app.cli.byte_sizes.parse_bytes`."""

ReductionOption = Annotated[
    bool,
    typer.Option(
        help="Simulate through the symmetry quotient (exact: the classes are checked; "
        "the JSON's `reduction` says whether it was used and why not)"
    ),
]
"""``--reduction/--no-reduction`` of every command that simulates through
:func:`topoopt.flowsim.iteration.simulate_iteration`'s symmetry reduction (default on; the
JSON's ``reduction`` is :func:`topoopt.flowsim.iteration.reduction_status`)."""

RoundingCheckOption = Annotated[
    int,
    typer.Option(
        metavar="N",
        help="Simulate each iteration N more times with every fabric link's bandwidth scaled "
        "by 1 + e (|e| 1e-15..1e-13, seeded): how far rounding alone moves it (0: no check)",
    ),
]
"""``--rounding-check`` of ``simulate``, ``compare`` and ``advise``
(:mod:`topoopt.flowsim.conditioning`; checked there: 0..64)."""

PricesOption = Annotated[
    str | None,
    typer.Option(help="Price table: a YAML file merged over the defaults, or a preset name"),
]
"""``--prices`` of every command that prices a fabric
(:func:`topoopt.fabrics.cost.resolve_prices`)."""

PresetOption = Annotated[Preset | None, typer.Option(help="Named price table, see docs/costs.md")]
"""``--preset``: a named price table (``--prices NAME`` names it too)."""

GpuOption = Annotated[
    str | None,
    typer.Option(
        "--gpu",
        help="GPU of the hardware catalogue replacing the plan's cluster.gpu (a100-80gb, "
        "h100-sxm, h200, b200, gb200, mi300x, ...; docs/validation.md); the plan's "
        "cluster.efficiency is kept when this names the plan's own GPU",
    ),
]
"""``--gpu`` of ``simulate``, ``compare``, ``design``, ``advise`` and ``cosearch``
(:mod:`traffic.hardware`)."""

EfficiencyOption = Annotated[
    float | None,
    typer.Option(
        "--efficiency",
        help="Kernel efficiency, a fraction of the GPU's peak FLOP/s in [0.001, 1], applied after "
        "--gpu (default: the plan's cluster.efficiency, else the GPU's in "
        "traffic/hardware/catalogue.yaml: h100-sxm 0.43, the default A100 0.5); 0.523 with "
        "interleaving fits Meta's Llama 3 405B runs (docs/validation.md)",
    ),
]
"""``--efficiency`` of every command with ``--gpu``: the plan's ``cluster.efficiency``
(:func:`traffic.load.with_efficiency`); checked by :func:`check_edge_units`."""

GpusOption = Annotated[
    int | None,
    typer.Option(
        "--gpus",
        help="GPUs of the cluster: the plan scaled to them (servers and dp re-derived, the "
        "global batch with dp; after --gpu and --efficiency, before --set)",
    ),
]
"""``--gpus`` of every command that reads one plan, and ``advise``'s jobs
(:func:`traffic.load.with_gpus`)."""

WorkLimitOption = Annotated[
    float | None,
    typer.Option(
        "--work-limit",
        help="Deterministic work budget of each designed fabric's search (joint, hybrid's "
        "routing), as design --work-limit (default: the solver's); raise it when a warning says "
        "a simulation did not fit it",
    ),
]
"""``--work-limit`` of ``simulate``, ``compare`` and ``advise``: the designed rows' searches
(:func:`topoopt.app.studies.compare.build_fabric`'s ``work_limit``)."""

SettingsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Set a plan field, as if the plan file said so (repeatable; after --gpu and "
        "--efficiency): parallelism.vpp=8, parallelism.global_batch_size=2048, "
        "model.seq_len=131072; the plan is validated again and its name says what was set",
    ),
]
"""``--set`` of every command that reads one plan (:func:`traffic.load.with_settings`)."""

F = TypeVar("F", bound=Callable[..., Any])

# Tables keep their columns when stdout is a pipe or a file (rich would assume 80 columns).
# markup off: names, paths and ids are the user's text, and "[/bold]" in a job name or a link id
# was read as a closing tag (rich.errors.MarkupError, a traceback after the HTML was written)
stdout = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160, markup=False)
stderr = Console(stderr=True, soft_wrap=True, markup=False)


GBPS_RANGE = (1e-3, 1e6)
"""Rates a ``*_gbps`` option may take: 1 Mbps to 1 Pbps a port (the hardware catalogue's NICs
stop at 1e6 Gbps too)."""

MAX_OVERSUBSCRIPTION = 1024
"""Largest ``--oversubscription``: a leaf of 1,024 server ports on one uplink (a 1e300:1 ask
built a 1:1 Clos, said nowhere but a row's note)."""

_INT_LIMIT = {"seed": 2**63 - 1}
"""Largest magnitude of an integer option (default 2**31 - 1: counts, ids and sizes; ports per
server: :func:`traffic.limits.check_server_ports`)."""


def check_edge_units(options: dict[str, Any]) -> None:
    """Check options given in the CLI's units, in those units, before they are converted.

    Every number first: a float option is finite, an integer option at most 2**31 - 1 in
    magnitude (``--seed``: int64), so an absurd value is one line before any work, not an
    ``OverflowError`` or ``MemoryError`` deep inside.

    By name: ``*_gbps`` options are rates in Gbps (:data:`GBPS_RANGE`), ``--oversubscription`` a
    ratio in 1..:data:`MAX_OVERSUBSCRIPTION`, ``*_ms`` and ``*_us`` options
    delays in ms or microseconds (finite, >= 0; a reconfiguration delay is ``--delay-us`` in
    every command), ``--efficiency`` a fraction in [0.001, 1]. The message names the option and the value as the user typed them, not the
    bytes/s or seconds the library sees.

    Examples
    --------
    >>> check_edge_units({"link_gbps": 100.0, "delay_us": None})
    >>> check_edge_units({"link_gbps": -100.0})
    Traceback (most recent call last):
    traffic.errors.InputError: --link-gbps: got -100.0; allowed: a finite number of Gbps > 0
    >>> check_edge_units({"link_gbps": 1e-300})
    Traceback (most recent call last):
    traffic.errors.InputError: --link-gbps: got 1e-300; allowed: a rate from 0.001 to 1,000,000 Gbps
    >>> check_edge_units({"time_limit": float("nan")})
    Traceback (most recent call last):
    traffic.errors.InputError: --time-limit: got nan; allowed: a finite number
    >>> check_edge_units({"efficiency": 1.5})
    Traceback (most recent call last):
    traffic.errors.InputError: --efficiency: got 1.5; allowed: a fraction of the GPU's peak FLOP/s in [0.001, 1]
    >>> check_edge_units({"degree": 3000})
    Traceback (most recent call last):
    traffic.errors.InputError: --degree: got 3000; allowed: an integer from 1 to 256 (network ports per server: 8 on a DGX H100, 72 on a GB200 NVL72 rack)
    >>> check_edge_units({"servers": 10**12})
    Traceback (most recent call last):
    traffic.errors.InputError: --servers: got 1000000000000; allowed: an integer of magnitude at most 2,147,483,647
    """  # noqa: E501
    for name, value in options.items():
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        option = "--" + name.replace("_", "-")
        if name == "efficiency" and not (math.isfinite(value) and MIN_EFFICIENCY <= value <= 1):
            raise InputError(option, value, EFFICIENCY_ALLOWED)
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(option, value, "a finite number")
        if name == "seed" and isinstance(value, int) and not 0 <= value < 2**63:
            raise InputError(option, value, "an integer 0..2**63 - 1 (numpy seeds are >= 0)")
        if name in ("degree", "optical_degree") and isinstance(value, int):
            check_server_ports(option, value)
        if isinstance(value, int) and abs(value) > _INT_LIMIT.get(name, 2**31 - 1):
            bound = _INT_LIMIT.get(name, 2**31 - 1)
            raise InputError(option, value, f"an integer of magnitude at most {bound:,}")
        if name == "time_limit":
            check_time_limit(option, value)
        if name == "work_limit":
            check_work_limit(option, value)
        if name.endswith("_gbps") and not (math.isfinite(value) and value > 0):
            raise InputError(option, value, "a finite number of Gbps > 0")
        if name.endswith("_gbps") and not GBPS_RANGE[0] <= value <= GBPS_RANGE[1]:
            # 1e-300 ended as "prices.nic_port: got 0.0", 1e300 as "port_bandwidth: got inf"
            lo, hi = GBPS_RANGE
            raise InputError(option, value, f"a rate from {lo:g} to {hi:,.0f} Gbps")
        if name == "oversubscription" and not 1 <= value <= MAX_OVERSUBSCRIPTION:
            raise InputError(
                option, value, f"a ratio from 1 to {MAX_OVERSUBSCRIPTION:,} (leaf down:up ports)"
            )
        if name.endswith("_ms") and not (math.isfinite(value) and value >= 0):
            raise InputError(option, value, "a finite number of ms >= 0")
        if name.endswith("_us") and not (math.isfinite(value) and value >= 0):
            raise InputError(option, value, "a finite number of us >= 0")


PROGRESS_EVERY_S = 5.0
"""When stderr is not a terminal, one progress line goes out at most this often (seconds)."""


class PlainProgress(io.TextIOBase):
    r"""stderr of a command whose stderr is a file or a pipe (nohup, CI): everything is held, and
    the latest complete line goes out at most every ``every_s`` seconds, the first one
    ``every_s`` after the start, so a long run shows it is alive and a short or failing one
    prints nothing but its own result (or its one error line).

    :meth:`rest` is what was held and not yet written, in order, for the end of a successful
    run.

    Examples
    --------
    >>> out, now = io.StringIO(), [0.0]
    >>> p = PlainProgress(out, every_s=5.0, clock=lambda: now[0])
    >>> _ = p.write("a\nb\n"); now[0] = 6.0; _ = p.write("c\nd")
    >>> out.getvalue(), p.rest()
    ('c\n', 'a\nb\nd')
    """

    def __init__(self, real: Any, every_s: float = PROGRESS_EVERY_S, clock=time.monotonic):
        self._real, self._every, self._clock = real, float(every_s), clock
        self._last = clock()
        self._lines: list[str] = []
        self._sent: set[int] = set()
        self._partial = ""

    def writable(self) -> bool:  # noqa: D102 (io hook)
        return True

    def write(self, s: str) -> int:  # noqa: D102 (io hook)
        text = self._partial + s
        *done, self._partial = text.split("\n")
        self._lines += done
        now = self._clock()
        if done and now - self._last >= self._every:
            self._sent.add(len(self._lines) - 1)
            self._real.write(self._lines[-1] + "\n")
            self._real.flush()
            self._last = now
        return len(s)

    def getvalue(self) -> str:
        """Everything written, sent or not."""
        return "".join(line + "\n" for line in self._lines) + self._partial

    def rest(self) -> str:
        """What was held and not yet written."""
        kept = (line + "\n" for i, line in enumerate(self._lines) if i not in self._sent)
        return "".join(kept) + self._partial


_STEP = re.compile(r"\[(?P<k>[0-9]+)/(?P<n>[0-9]+)\]")


class CommandProgress:
    r"""The progress of one command: a rich bar with elapsed time and ETA on a terminal, the
    plain lines of :class:`PlainProgress` otherwise.

    Call it with each one-line message (it is the ``progress`` callback the studies take). A
    message that opens with ``[k/N]`` (``compare``'s ``[2/5] fat-tree: building``) sets the bar
    to step ``k`` of ``N``, ``k - 1`` steps done, so the ETA is the mean time of a finished
    step times the steps left; :meth:`advance` and :meth:`total` count steps explicitly. Work
    with no count shows a pulsing bar and the elapsed time. On a terminal the messages are
    printed above the bar as written; off one they go to stderr (held and sent every
    :data:`PROGRESS_EVERY_S` by :func:`handle_errors`).

    Parameters
    ----------
    label : str
        The bar's name until the first message.
    terminal : bool, optional
        Draw the bar (default: whether stderr is a terminal).
    console : rich.console.Console, optional
        Where the bar goes (default: a console on the current stderr).

    Examples
    --------
    >>> out = io.StringIO()
    >>> with CommandProgress("compare", terminal=False, console=Console(file=out)) as p:
    ...     p("[1/2] ideal: building")
    ...     p("[2/2] fat-tree: building")
    >>> out.getvalue()
    '[1/2] ideal: building\n[2/2] fat-tree: building\n'
    """

    def __init__(self, label: str, terminal: bool | None = None, console: Console | None = None):
        self.label = label
        self.terminal = _is_terminal(sys.stderr) if terminal is None else bool(terminal)
        self._console = console
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> CommandProgress:
        if self.terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            console = self._console or Console(file=sys.stderr, force_terminal=True, markup=False)
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=20),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=console,
                transient=True,
                redirect_stdout=False,  # stdout is the command's data, never the bar's
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=None)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
            self._bar = None

    def __call__(self, message: str) -> None:
        """One progress line (a ``[k/N]`` prefix sets the step)."""
        if self._bar is None:
            if self._console is not None:
                self._console.file.write(message + "\n")
            else:
                print(message, file=sys.stderr)
            return
        self._bar.console.print(message, markup=False, highlight=False, soft_wrap=True)
        m = _STEP.match(message)
        description = message[m.end() :].strip() if m else message
        if m:
            self._bar.update(self._task, total=int(m["n"]), completed=int(m["k"]) - 1)
        text = self.label + ": " + description
        room = max(20, self._bar.console.width - 50)  # the count, times and ETA stay visible
        if len(text) > room:
            text = text[: room - 1] + "…"
        self._bar.update(self._task, description=text)

    def total(self, n: int) -> None:
        """The work has ``n`` steps."""
        if self._bar is not None:
            self._bar.update(self._task, total=n)

    def advance(self, steps: int = 1) -> None:
        """``steps`` more steps are done."""
        if self._bar is not None:
            self._bar.advance(self._task, steps)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def command_progress(label: str) -> CommandProgress:
    """The :class:`CommandProgress` of the running command (a bar on a terminal)."""
    return CommandProgress(label)


_DEPTH = [0]
"""How many :func:`handle_errors` wrappers are running (nested commands report once)."""


def _live_progress(stream: Any) -> bool:
    """Whether progress lines go out as they happen: on a terminal, or ``TOPOOPT_PROGRESS=1``."""
    if os.environ.get("TOPOOPT_PROGRESS") == "1":
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def handle_errors(func: F) -> F:
    """Turn :class:`InputError` (and unreadable files, and a request beyond the memory) into one
    line on stderr and exit code 2; nothing else is printed on stderr by a failing command (see
    :func:`_live_progress`)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if _DEPTH[0]:  # called from another command: its wrapper reports the error
            return func(*args, **kwargs)
        _OUTPUTS.clear()  # the outputs of this invocation (prepare_output)
        _WARNINGS.clear()  # the warning lines of this invocation (warn_line)
        _ARGUMENTS[:] = list(kwargs.items())  # its inputs, among them (check_not_an_input)
        # Warnings (numpy overflow on absurd but finite inputs, ...) are held back: a command that
        # ends in an error prints that one line only; one that succeeds re-issues them (so the
        # caller's warning filters, e.g. pytest's "error", still apply).
        # Progress goes to stderr as it happens on a terminal; otherwise (PlainProgress) one line
        # every PROGRESS_EVERY_S goes out and the rest is printed when the command succeeds.
        real_err = sys.stderr
        held = None if _live_progress(real_err) else PlainProgress(real_err, PROGRESS_EVERY_S)
        error = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if held is not None:
                sys.stderr = held
            _DEPTH[0] += 1
            try:
                check_edge_units(kwargs)
                result = func(*args, **kwargs)
            except InputError as exc:
                error = f"error: {exc}"
            except OSError as exc:  # a file that vanished, a name too long, ...
                error = f"error: {exc.filename or exc}: {exc.strerror or exc}"
            except MemoryError:
                error = (
                    "error: request: got 'more memory than this machine has'; allowed: smaller "
                    "sizes (see TOPOOPT_MEMORY_BUDGET_GB in docs/inputs.md)"
                )
            except BaseException:  # an exit code of the command's own, or a crash: show all
                if held is not None:
                    sys.stderr = real_err
                    real_err.write(held.rest())
                    held = None
                raise
            finally:
                _DEPTH[0] -= 1
                if held is not None and sys.stderr is held:
                    sys.stderr = real_err
        if error is not None:
            print(error, file=sys.stderr)
            raise typer.Exit(2) from None
        if held is not None:
            sys.stderr.write(held.rest())
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        return result

    return wrapper  # type: ignore[return-value]


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, tuples and non-finite floats into plain JSON values."""
    import numpy as np  # here, not at the top: ``topoopt --help`` imports no numpy

    def plain(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {str(k): plain(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [plain(v) for v in obj]
        if isinstance(obj, np.ndarray):
            return plain(obj.tolist())
        if isinstance(obj, np.integer):
            return int(obj)
        if isinstance(obj, np.floating | float):
            f = float(obj)
            return f if math.isfinite(f) else None
        if isinstance(obj, np.bool_):
            return bool(obj)
        return obj

    return plain(obj)


def _first_non_finite(obj: Any, where: str) -> str | None:
    """Dotted path of the first non-finite float in a JSON-able value, or None."""
    stack = [(obj, where)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return at
        if isinstance(v, dict):
            stack.extend((x, f"{at}.{k}") for k, x in reversed(list(v.items())))
        elif isinstance(v, list | tuple):
            stack.extend((x, f"{at}[{i}]") for i, x in reversed(list(enumerate(v))))
    return None


def dumps_strict(obj: Any, what: str = "output", indent: int | None = None) -> str:
    """Strict JSON text of ``obj`` (through :func:`to_jsonable`): never ``NaN``/``Infinity``.

    Raises
    ------
    InputError
        A non-finite number is left, named by its path (``what`` is the root's name).

    Examples
    --------
    >>> dumps_strict({"a": [1, 2.5]})
    '{"a": [1, 2.5]}'
    """
    check_finite(obj, what)  # a non-finite time/cost/rate is an error, never null
    doc = to_jsonable(obj)
    try:
        return json.dumps(doc, indent=indent, allow_nan=False)
    except ValueError:
        at = _first_non_finite(doc, what) or what
        raise InputError(at, "a non-finite number", "finite numbers only (strict JSON)") from None


def _click_context() -> Any:
    """The click context of the running command, or None outside one (typer vendors click)."""
    try:
        from typer._click.globals import get_current_context
    except ImportError:  # a typer that uses click itself
        from click import get_current_context
    return get_current_context(silent=True)


def given_options(*names: str) -> list[str]:
    """The parameters among ``names`` (python names, ``"work_limit"``) that the running command
    was given on its command line or from the environment, not left at their defaults; ``[]``
    outside a command (a library call)."""
    ctx = _click_context()
    if ctx is None:
        return []
    out = []
    for name in names:
        src = ctx.get_parameter_source(name)
        if src is not None and src.name not in ("DEFAULT", "DEFAULT_MAP"):
            out.append(name)
    return out


def _echo(value: Any) -> Any:
    """An input value as JSON: paths as text, enumeration members as their values."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [_echo(v) for v in value]
    return value


def _invocation() -> tuple[str | None, dict[str, Any]]:
    """``(command, inputs)`` of the running command, from its click context.

    ``command`` is the command path below ``topoopt`` (``"compare"``, ``"fabric fat-tree"``);
    ``inputs`` echoes what the command was given: ``{"arguments": {NAME: value},
    "options": {"--flag": value}}``, every option with its value, defaults included. Outside a
    command (a library call): ``(None, {})``.
    """
    ctx = _click_context()
    if ctx is None:
        return None, {}
    names, up = [], ctx
    while up.parent is not None:  # the root (topoopt itself) is not named
        names.append(up.info_name)
        up = up.parent
    if not names:
        return None, {}
    arguments: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for param in ctx.command.params:
        if param.name not in ctx.params:
            continue
        value = _echo(ctx.params[param.name])
        if param.param_type_name == "argument":
            arguments[param.name] = value
        else:
            flag = next((o for o in param.opts if o.startswith("--")), param.opts[0])
            options[flag] = value
    return " ".join(reversed(names)), {"arguments": arguments, "options": options}


_WARNINGS: list[str] = []
"""The warning lines of the running command (:func:`warn_line`); :func:`handle_errors` empties
it at the start of every command."""


def warn_line(text: str | None) -> None:
    """Say one warning line of the running command: on stderr at once, in the ``warnings`` of the
    ``--json`` document (:func:`json_envelope`), and in the HTML report of the commands that
    pass :func:`warnings_said` to their page. Used whenever a search falls back to another
    objective, is cut by the wall clock, or coarsens its model. ``None`` or ``""`` says nothing.

    Examples
    --------
    >>> _WARNINGS.clear(); warn_line("joint: cut by the clock"); warn_line(None)
    >>> warnings_said()
    ['warning: joint: cut by the clock']
    >>> _WARNINGS.clear()
    """
    if not text:
        return
    line = text if text.startswith("warning:") else f"warning: {text}"
    if line not in _WARNINGS:
        _WARNINGS.append(line)
        print(line, file=sys.stderr)


def nic_hint(gpu: str | None, link_gbps: float) -> None:
    """One :func:`warn_line` when ``--gpu`` names a GPU whose reference server has faster NICs
    (the catalogue's ``nic_gbps``, one NIC per GPU) than the ``--link-gbps`` the command was left
    at by default: ``--gpu h100-sxm`` alone models H100s behind 100 G ports, not a DGX H100's
    400 G. Nothing when ``--link-gbps`` was given (any value is then the user's choice), for an
    unknown GPU (the command reports it) or outside a command.

    Examples
    --------
    >>> _WARNINGS.clear(); nic_hint("h100-sxm", 100.0); warnings_said()  # no command running
    []
    """
    if gpu is None or _click_context() is None or given_options("link_gbps"):
        return
    from traffic.hardware import load_catalogue

    spec = load_catalogue().gpus.get(gpu)
    if spec is None or spec.nic_gbps is None or not spec.nic_gbps > link_gbps:
        return
    warn_line(
        f"--link-gbps: {link_gbps:g} Gbps a port (the default) is slower than the reference "
        f"{spec.label} server's NICs, {spec.nic_gbps:g} Gbps a GPU (docs/validation.md): give "
        f"--link-gbps {spec.nic_gbps:g} to model that server, or --link-gbps {link_gbps:g} "
        "to keep this"
    )


def warnings_said() -> list[str]:
    """The warning lines of the running command so far (:func:`warn_line`), in order."""
    return list(_WARNINGS)


def json_envelope(obj: Any) -> dict[str, Any]:
    """The one envelope of every ``--json`` document: ``topoopt_version``, ``command``,
    ``inputs`` (:func:`_invocation`) and ``warnings`` (the lines of :func:`warn_line`, empty when
    the run degraded nothing) first, then the command's own keys (a document that is not a
    mapping goes under ``"result"``).

    Examples
    --------
    >>> doc = json_envelope({"iteration_s": 1.5})
    >>> list(doc), doc["command"], doc["inputs"], doc["warnings"], doc["iteration_s"]
    (['topoopt_version', 'command', 'inputs', 'warnings', 'iteration_s'], None, {}, [], 1.5)
    """
    from topoopt import __version__

    command, inputs = _invocation()
    body = dict(obj) if isinstance(obj, dict) else {"result": obj}
    clash = {"topoopt_version", "command", "inputs", "warnings"} & set(body)
    if clash:  # a programming error of a command, not bad input
        raise ValueError(f"a JSON document of {command} has envelope keys of its own: {clash}")
    said = warnings_said() if command is not None else []  # outside a command: none of its own
    return {
        "topoopt_version": __version__,
        "command": command,
        "inputs": inputs,
        "warnings": said,
        **body,
    }


CLOCK_FIELDS = ("wall_s", "build_s", "simulate_s", "flow_wall_s")
"""Wall-clock fields of the ``--json`` documents (a solver's or a study's wall time, compare's
build and simulate times, the joint search's per flow-selection times; and the clock time ``t``
of a design's ``trace`` entries): left out
unless ``topoopt --timings COMMAND`` asks for them, so that the same command gives the same
bytes on any machine (issue 30). Files written with ``--out`` keep theirs (a design.json records
its solve)."""

_TIMINGS: list[bool] = [False]


def set_timings(on: bool) -> None:
    """Keep (``True``) or drop (default) the :data:`CLOCK_FIELDS` of ``--json`` documents."""
    _TIMINGS[0] = bool(on)


def without_clock(x: Any, key: str = "") -> Any:
    """``x`` without its :data:`CLOCK_FIELDS` at any depth (and a ``trace`` entry's ``t``).

    >>> without_clock({"a": 1, "wall_s": 2.0, "trace": [{"t": 0.1, "work": 3}]})
    {'a': 1, 'trace': [{'work': 3}]}
    """
    if isinstance(x, dict):
        drop = CLOCK_FIELDS + (("t",) if key == "trace" else ())
        return {k: without_clock(v, k) for k, v in x.items() if k not in drop}
    if isinstance(x, list | tuple):
        return [without_clock(v, key) for v in x]
    return x


def emit_json(obj: Any) -> None:
    """Print exactly one JSON document on stdout (strict JSON: no NaN or Infinity), in the
    envelope of :func:`json_envelope`, without its wall-clock fields (:data:`CLOCK_FIELDS`)
    unless ``--timings`` asked for them."""
    doc = json_envelope(obj)
    if not _TIMINGS[0]:
        doc = without_clock(doc)
    sys.stdout.write(dumps_strict(doc, "result", indent=2) + "\n")
    sys.stdout.flush()


# Output paths named in this invocation: real path -> (option, path as given, force).
# handle_errors resets it at the start of every command.
_OUTPUTS: dict[str, tuple[str, str, bool]] = {}


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def parse_name_list(text: str, option: str) -> list[str]:
    """The comma-separated names of an option, stripped; no empty list and no empty item.

    Examples
    --------
    >>> parse_name_list("ideal, fat-tree", "--fabrics")
    ['ideal', 'fat-tree']
    >>> parse_name_list("ideal,,fat-tree", "--fabrics")
    Traceback (most recent call last):
    traffic.errors.InputError: --fabrics: got 'ideal,,fat-tree'; allowed: comma-separated names, none empty
    """  # noqa: E501
    names = [t.strip() for t in text.split(",")]
    if not text.strip() or not all(names):
        raise InputError(option, text, "comma-separated names, none empty")
    return names


# The arguments of this invocation, (parameter name, value); handle_errors sets it.
_ARGUMENTS: list[tuple[str, Any]] = []


def _paths_in(value: Any) -> list[str]:
    if isinstance(value, str | os.PathLike):
        return [os.fspath(value)]
    if isinstance(value, list | tuple):
        return [os.fspath(v) for v in value if isinstance(v, str | os.PathLike)]
    return []


def check_not_an_input(path: Path, option: str) -> None:
    """Refuse an output that is an input of the same command, or a folder holding one.

    An input is any other argument of the running command naming an existing file or folder
    (``--force`` or not: replacing it would lose the input the output is computed from).

    Raises
    ------
    InputError
        Naming the output option and the input's parameter.
    """
    out = os.path.realpath(path)
    for pname, value in _ARGUMENTS:
        if pname in OUTPUT_PARAMETERS or "--" + pname.replace("_", "-") == option:
            continue
        for given in _paths_in(value):
            try:
                if not os.path.lexists(given):
                    continue
                real = os.path.realpath(given)
            except (OSError, ValueError):
                continue
            inside = real == out or real.startswith(out.rstrip(os.sep) + os.sep)
            if inside or _same_file(given, str(path)):
                what = "the input" if real == out or _same_file(given, str(path)) else "a folder"
                raise InputError(
                    option,
                    f"{path} ({what} {given} of {pname.replace('_', '-')})",
                    "a path that is not an input of this command (and holds none)",
                )


def prepare_output(path: Path | None, force: bool, option: str | None = None) -> Path | None:
    """Check an output path before any work is done; remember it for the final write.

    Errors (exit 2, before any work): two outputs of one command naming the same file, a file that
    exists without --force, a folder that is missing or cannot be written (see
    :func:`topoopt.atomic.check_writable`). ``option`` (e.g. ``"--html"``) names the output in
    messages.
    """
    if path is None:
        return None
    name = option or str(path)
    typed = OUTPUT_TEXT.get((option or "").lstrip("-").replace("-", "_"))
    if typed is not None and typed.endswith(("/", os.sep)) and os.fspath(path) == str(Path(typed)):
        raise InputError(name, typed, "a file path (no trailing /: that names a folder)")
    check_not_an_input(path, name)
    key = os.path.realpath(path)
    for other, (other_name, other_path, _) in _OUTPUTS.items():
        if key == other or _same_file(key, other):
            raise InputError(name, str(path), f"a file different from {other_name} ({other_path})")
    p = check_writable(path, force=force)
    _OUTPUTS[key] = (name, str(path), force)
    return p


def _force_of(path: Path) -> bool:
    """--force as given to :func:`prepare_output` for ``path`` (False if it was not prepared)."""
    return _OUTPUTS.get(os.path.realpath(path), ("", "", False))[2]


def write_output_text(path: Path, text: str) -> None:
    """Write a text output atomically and say so on stderr.

    Without --force a file that appeared at ``path`` while the command ran is kept (exit 2).
    """
    atomic_write_text(path, text, force=_force_of(path))
    print(f"wrote {path}", file=sys.stderr)


def write_output_with(path: Path, writer: Callable[[Path], None]) -> None:
    """Write an output through ``writer(tmp_path)`` atomically and say so on stderr."""
    atomic_write_with(path, writer, force=_force_of(path))
    print(f"wrote {path}", file=sys.stderr)


def write_output_json(path: Path, obj: Any, indent: int | None = None) -> None:
    """Write ``obj`` as strict JSON (:func:`dumps_strict`) atomically; say so on stderr."""
    write_output_text(path, dumps_strict(obj, str(path), indent=indent) + "\n")


_PROCESS_T0: float | None = None
"""``time.perf_counter()`` at this process's start, set by the console entry point
(:func:`mark_process_start`); None in-process (a test's ``CliRunner``)."""


def mark_process_start() -> None:
    """Record when this process started (Linux ``/proc``; else now), so that a command's
    ``--time-limit`` also covers the interpreter's start and the imports before the command
    (measured under load 21: seconds). Called by :func:`topoopt.app.cli.app.main` only."""
    global _PROCESS_T0
    now = time.perf_counter()
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as fh:
            up = float(fh.read().split()[0])
        age = min(max(up - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0), 600.0)
    except (OSError, ValueError, IndexError):
        age = 0.0
    _PROCESS_T0 = now - age


def command_started() -> float:
    """``time.perf_counter()`` when this command started: the process's start from the console
    entry point, else now (a command invoked in-process)."""
    return time.perf_counter() if _PROCESS_T0 is None else _PROCESS_T0
