"""The ``topoopt`` typer application.

Each command lives in its own module under :mod:`topoopt.app.cli.commands` and exposes
``register(app)``; modules are registered in sorted order, so adding a command is adding a file.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

from topoopt.app.cli import commands
from topoopt.app.cli.help_style import StyledGroup, apply_help_style

__all__ = ["app", "main", "PANELS"]

PANELS = {
    "Core commands": ("traffic", "fabric", "design", "simulate", "compare"),
    "Studies": (
        "advise",
        "demo",
        "breakeven",
        "cosearch",
        "whatif",
        "reconfig",
        "cluster",
        "collective",
    ),
    "Tools": ("export", "strides", "netsim"),
}
"""The help panels of ``topoopt -h``, in order: the five commands a new user needs first (plan ->
traffic, fabric, design, simulate, compare), the studies built on them, and the tools (exports
to other simulators, the stride search, the bare flow model)."""

# click's exception classes, reached through typer's public BadParameter (typer vendors click)
_CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def _one_line(exc: Exception) -> str:
    """``error: COMMAND: MESSAGE`` of a usage error, on one line and at most 300 characters."""
    ctx = getattr(exc, "ctx", None)
    where = f"{ctx.command_path}: " if ctx is not None else ""
    text = " ".join(f"{where}{exc.format_message()}".split())  # type: ignore[attr-defined]
    return "error: " + (text if len(text) <= 300 else text[:297] + "...")


class _OneLineErrors(StyledGroup):
    """The root group: a usage error (an option value of the wrong type, an unknown choice or
    command, a missing argument) is one ``error:`` line and exit code 2, like every other bad
    input, not a usage box (a bare ``topoopt`` or ``topoopt fabric`` still prints the help)."""

    def _guard(self, call, *args, **kwargs):
        try:
            return call(*args, **kwargs)
        except _CLICK_ERROR as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":
                raise
            print(_one_line(exc), file=sys.stderr)
            raise typer.Exit(exc.exit_code) from None

    def list_commands(self, ctx):  # noqa: D102 (click hook): the order of PANELS
        rank = {name: i for i, name in enumerate(n for names in PANELS.values() for n in names)}
        return sorted(super().list_commands(ctx), key=lambda name: rank.get(name, len(rank)))

    def make_context(self, *args, **kwargs):  # noqa: D102 (click hook)
        return self._guard(super().make_context, *args, **kwargs)

    def invoke(self, ctx):  # noqa: D102 (click hook)
        return self._guard(super().invoke, ctx)


app = typer.Typer(
    cls=_OneLineErrors,
    name="topoopt",
    help="Design the optical network of a training cluster together with the job that runs on it.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from topoopt import __version__

        print(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    timings: bool = typer.Option(
        False,
        "--timings",
        help="Keep the wall-clock fields (wall_s, build_s, simulate_s) in --json documents.",
    ),
) -> None:
    """Design the optical network of a training cluster together with the job that runs on it."""
    from topoopt.app.cli.common import set_timings

    set_timings(timings)


def _panel_order(app: typer.Typer) -> None:
    """Put every registered command and group in its :data:`PANELS` panel (a command named in
    no panel under "Other"); the root group lists them in that order."""
    panel = {name: title for title, names in PANELS.items() for name in names}
    for infos in (app.registered_commands, app.registered_groups):
        for info in infos:
            info.rich_help_panel = panel.get(info.name, "Other")


for _info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
    importlib.import_module(f"{commands.__name__}.{_info.name}").register(app)
_panel_order(app)
apply_help_style(app)  # PLAN not {plan}, no <bool>, brackets in help texts kept


def main() -> None:
    """Console-script entry point."""
    from topoopt.app.cli.common import mark_process_start
    from topoopt.app.studies import engine

    mark_process_start()  # a --time-limit covers the start-up too
    engine.EXIT_ON_DEATH = True  # this process is the command: a dead Ray instance ends it
    app()
