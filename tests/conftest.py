"""Test-suite configuration."""

# tests/peers/ holds programs run by other interpreters (SimGrid's Debian Python), not tests.
collect_ignore = ["peers"]
