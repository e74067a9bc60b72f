"""``python -m topoopt`` runs the command line (the same as the ``topoopt`` console script)."""

from topoopt.app.cli.app import main

main()
