"""How ``--help`` reads: metavars in capitals, help texts taken literally.

Typer (0.29) writes arguments as ``{plan}``, every flag with ``<bool>`` and types as ``<float>``,
and parses help texts as rich markup, so ``[u,v,count]`` disappears. Every command and group of
the application is given the classes below (:func:`apply_help_style`, called by
:mod:`topoopt.app.cli.app`), which

- name arguments by their metavar, ``PLAN`` (the parameter name in capitals, or an explicit
  ``metavar``), in the usage line and the argument panel;
- show no metavar for flags (``--force``, ``--json``);
- show value options as ``INTEGER``, ``FLOAT``, ``PATH``, ``TEXT`` or ``[a|b|c]`` (choices in full);
- escape rich markup in every help text, so brackets are printed as written;
- fill in defaults that live in the code (:func:`code_default`) when the help is printed, so a help
  text quotes the constant the code uses without importing a solver at start-up.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

import typer
from rich.markup import escape
from typer.core import TyperArgument, TyperCommand, TyperGroup
from typer.models import DefaultPlaceholder

__all__ = [
    "StyledCommand",
    "StyledGroup",
    "apply_help_style",
    "code_default",
    "fill_code_defaults",
    "metavar_of",
]

_TYPE_NAMES = {"int": "INTEGER", "float": "FLOAT", "path": "PATH", "str": "TEXT", "bool": "BOOLEAN"}


_CODE_DEFAULT = re.compile(r"@@([\w.]+):(\w+)@@")


def code_default(module: str, name: str) -> str:
    """A placeholder for the value of ``module.name`` in a help text, filled in (``%g``) when the
    help is printed, so a documented default is the code's constant, never a copy of it.

    Examples
    --------
    >>> text = "default " + code_default("topoopt.fabrics.fabric", "DEFAULT_LINK_LATENCY") + " s"
    >>> fill_code_defaults(text)
    'default 1e-06 s'
    """
    return f"@@{module}:{name}@@"


def fill_code_defaults(text: str) -> str:
    """``text`` with every :func:`code_default` placeholder replaced by the constant's value."""
    return _CODE_DEFAULT.sub(
        lambda m: f"{getattr(importlib.import_module(m.group(1)), m.group(2)):g}", text
    )


def _fill(cmd: Any) -> None:
    for p in cmd.params:
        if getattr(p, "help", None) and "@@" in p.help:
            p.help = fill_code_defaults(p.help)


def metavar_of(param: Any, ctx: Any) -> str:
    """The capitalised metavar of a parameter (``""`` for a flag).

    Examples
    --------
    >>> import click
    >>> from topoopt.app.cli.app import app
    >>> cmd = typer.main.get_command(app).commands["design"]
    >>> ctx = click.Context(cmd)
    >>> {p.name: metavar_of(p, ctx) for p in cmd.params if p.name in ("plan", "degree", "force")}
    {'plan': 'PLAN', 'degree': 'INTEGER', 'force': ''}
    """
    if isinstance(param, TyperArgument):
        return (param.metavar or param.name or "ARG").upper()
    if getattr(param, "is_flag", False):
        return ""
    if param.metavar:
        return param.metavar
    desc = param.type_descriptor
    if desc.is_choice:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices or ()) + "]"
    shown = (param.display_type(ctx) or "").strip("<>")
    return _TYPE_NAMES.get(shown, shown.upper())


def _style(cmd: Any) -> None:
    """Escape the help texts and fix the metavars of one command's parameters."""
    rich = getattr(cmd, "rich_markup_mode", None) == "rich"
    if rich and cmd.help:
        cmd.help = escape(cmd.help)
    if rich and getattr(cmd, "short_help", None):
        cmd.short_help = escape(cmd.short_help)
    import click

    ctx = click.Context(cmd)
    for p in cmd.params:
        if rich and getattr(p, "help", None):
            p.help = escape(p.help)
        if isinstance(p, TyperArgument):
            # the type column of the argument panel: TEXT / PATH / INTEGER, not <str>
            shown = (p.display_type(ctx) or "").strip("<>")
            kind = _TYPE_NAMES.get(shown, shown.upper())
            p.display_type_rich = lambda ctx=None, _kind=kind: _kind
        p.metavar = metavar_of(p, ctx)


def _usage_pieces(cmd: Any, ctx: Any, rest: list[str]) -> list[str]:
    pieces = [cmd.options_metavar] if cmd.options_metavar else []
    for p in cmd.get_params(ctx):
        if isinstance(p, TyperArgument):
            name = p.metavar + ("..." if p.nargs != 1 else "")
            pieces.append(name if p.required else f"[{name}]")
    return pieces + rest


def _flag_without_metavar(option: Any) -> Any:
    if option is not None:
        option.metavar = ""
    return option


class StyledCommand(TyperCommand):
    """A Typer command whose help follows the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _style(self)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _usage_pieces(self, ctx, [])

    def format_help(self, ctx: Any, formatter: Any) -> Any:
        _fill(self)
        return super().format_help(ctx, formatter)

    def get_help_option(self, ctx: Any) -> Any:
        return _flag_without_metavar(super().get_help_option(ctx))


class StyledGroup(TyperGroup):
    """A Typer group whose help follows the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _style(self)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _usage_pieces(self, ctx, [self.subcommand_metavar])

    def get_help_option(self, ctx: Any) -> Any:
        return _flag_without_metavar(super().get_help_option(ctx))


def _default(cls: Any, base: type) -> bool:
    """True when ``cls`` is typer's default (unset, a placeholder, or ``base`` itself)."""
    return cls is None or isinstance(cls, DefaultPlaceholder) or cls is base


def apply_help_style(app: typer.Typer) -> None:
    """Give every command and group of ``app`` (recursively) the styled classes.

    Commands or groups registered with a class of their own keep it.
    """
    if _default(app.info.cls, TyperGroup):
        app.info.cls = StyledGroup
    for info in app.registered_commands:
        if _default(info.cls, TyperCommand):
            info.cls = StyledCommand
    for group in app.registered_groups:
        if _default(group.cls, TyperGroup):
            group.cls = StyledGroup
        if group.typer_instance is not None:
            apply_help_style(group.typer_instance)
