"""Unit conversions, used only at the edges (CLI, reports, file formats).

Inside the code everything is bytes, seconds and bytes per second.
"""

from __future__ import annotations

__all__ = ["gbps_to_bytes_per_s", "bytes_per_s_to_gbps", "s_to_ms", "ms_to_s", "duration_text"]


def gbps_to_bytes_per_s(gbps: float) -> float:
    """Gigabits per second (10^9 bit/s) to bytes per second.

    >>> gbps_to_bytes_per_s(100)
    12500000000.0
    """
    return float(gbps) * 1e9 / 8.0


def bytes_per_s_to_gbps(bps: float) -> float:
    """Bytes per second to gigabits per second.

    >>> bytes_per_s_to_gbps(12.5e9)
    100.0
    """
    return float(bps) * 8.0 / 1e9


def s_to_ms(s: float) -> float:
    """Seconds to milliseconds."""
    return float(s) * 1e3


def ms_to_s(ms: float) -> float:
    """Milliseconds to seconds."""
    return float(ms) / 1e3


def duration_text(seconds: float) -> str:
    """A duration for a progress line: ms up to 10 s, seconds above (the reports' rule,
    :data:`topoopt.app.report.time_units.SECONDS_ABOVE_S`), 4 significant digits.

    >>> duration_text(0.0198), duration_text(34.21)
    ('19.8 ms', '34.21 s')
    """
    s = float(seconds)
    return f"{s:.4g} s" if abs(s) > 10.0 else f"{s * 1e3:.4g} ms"
