"""Byte sizes as the command line takes them: ``1GiB``, ``512MiB``, ``10GB``, ``1e9``.

One parser for every option that takes a size (``collective --size``, ``--split-allreduce`` of
``simulate`` and ``compare``, ``cosearch --gpu-memory-gb``), so every one of them accepts the
same spellings and refuses a bad one with the same line (field, value, what is allowed).
"""

from __future__ import annotations

import math
import re

from traffic.errors import InputError

__all__ = ["BYTE_UNITS", "SIZE_HELP", "MAX_BYTES", "parse_bytes"]

BYTE_UNITS: dict[str, int] = {
    "B": 1,
    "kB": 10**3,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "PB": 10**15,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    "PiB": 2**50,
}
"""Suffixes, case as written: decimal (SI, ``GB`` = 1e9 bytes) and binary (IEC, ``GiB`` = 2**30
bytes). A lower-case ``b`` (bits) or a bare ``G`` is refused rather than guessed."""

MAX_BYTES = 2**62
"""The largest size taken (4 EiB): beyond every real message or memory, and exact in int64."""

SIZE_HELP = "a size: bytes (1e9) or with a suffix (512MiB, 1GiB, 10GB)"
"""How the help texts name the accepted spellings."""

_SIZE = re.compile(
    r"\s*(?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>[A-Za-z]*)\s*"
)


def _allowed(plain: str, minimum: str) -> str:
    units = ", ".join(BYTE_UNITS)
    return f"a number of {plain} {minimum}, or a number with a suffix ({units}), e.g. 512MiB"


def parse_bytes(
    text: str | float | None,
    option: str,
    *,
    plain_unit: float = 1.0,
    plain_name: str = "bytes",
    allow_zero: bool = False,
) -> float | None:
    """The number of bytes that ``text`` names; ``None`` stays ``None`` (an option not given).

    Parameters
    ----------
    text : str, float or None
        What the user typed: a plain number (``4000000``, ``1e9``) or a number and a suffix of
        :data:`BYTE_UNITS` (``512MiB``, ``1.5 GB``).
    option : str
        The option's name in messages (``"--size"``).
    plain_unit : float
        Bytes of one unit of a plain number: 1 (a plain number is bytes) unless the option is
        named for its unit (``--gpu-memory-gb``: 1e9).
    plain_name : str
        The unit of a plain number in messages.
    allow_zero : bool
        Whether 0 is a size (else a size is > 0).

    Returns
    -------
    float or None
        Bytes.

    Raises
    ------
    InputError
        Not a number with an optional known suffix, negative, zero (unless allowed), between 0
        and 1 byte, not finite, or above :data:`MAX_BYTES`; one line naming the option, the value and what is allowed.

    Examples
    --------
    >>> parse_bytes("1GiB", "--size"), parse_bytes("10GB", "--size"), parse_bytes("1e6", "--size")
    (1073741824.0, 10000000000.0, 1000000.0)
    >>> parse_bytes("80", "--gpu-memory-gb", plain_unit=1e9, plain_name="GB")
    80000000000.0
    >>> parse_bytes("1e-300", "--size")
    Traceback (most recent call last):
    traffic.errors.InputError: --size: got '1e-300'; allowed: at least 1 byte (messages and memories are whole bytes)
    >>> parse_bytes("10Gb", "--size")
    Traceback (most recent call last):
    traffic.errors.InputError: --size: got '10Gb'; allowed: a number of bytes > 0, or a number with a suffix (B, kB, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB), e.g. 512MiB
    """  # noqa: E501
    if text is None:
        return None
    minimum = ">= 0" if allow_zero else "> 0"
    allowed = _allowed(plain_name, minimum)
    if isinstance(text, int | float) and not isinstance(text, bool):
        number, scale = float(text), plain_unit
    else:
        m = _SIZE.fullmatch(str(text))
        if m is None or (m["unit"] and m["unit"] not in BYTE_UNITS):
            raise InputError(option, text, allowed)
        number = float(m["number"])
        scale = BYTE_UNITS[m["unit"]] if m["unit"] else plain_unit
    size = number * scale
    if not math.isfinite(size) or size < 0 or (size == 0 and not allow_zero):
        raise InputError(option, text, allowed)
    if 0 < size < 1:
        raise InputError(option, text, "at least 1 byte (messages and memories are whole bytes)")
    if size > MAX_BYTES:
        raise InputError(option, text, f"at most {MAX_BYTES:,} bytes (4 EiB)")
    return size
