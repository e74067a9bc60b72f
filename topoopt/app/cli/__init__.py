"""The ``topoopt`` command line (typer). Thin: parse, one library call, render."""
