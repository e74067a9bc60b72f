"""The ``topoopt`` typer application.

Each command lives in its own module under :mod:`topoopt.cli.commands` and exposes
``register(app)``; modules are registered in sorted order, so adding a command is adding a file.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer

from topoopt.cli import commands
from topoopt.cli.help_style import apply_help_style

__all__ = ["app", "main"]

app = typer.Typer(
    name="topoopt",
    help="Design the optical network of a training cluster together with the job that runs on it.",
    no_args_is_help=True,
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
) -> None:
    """Design the optical network of a training cluster together with the job that runs on it."""


for _info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
    importlib.import_module(f"{commands.__name__}.{_info.name}").register(app)
apply_help_style(app)  # PLAN not {plan}, no <bool>, brackets in help texts kept


def main() -> None:
    """Console-script entry point."""
    app()
