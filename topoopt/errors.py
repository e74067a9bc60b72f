"""Error types of topoopt (re-exported from :mod:`traffic.errors`)."""

from traffic.errors import InputError, check

__all__ = ["InputError", "check"]
