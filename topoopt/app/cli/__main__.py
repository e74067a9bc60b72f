"""``python -m topoopt.app.cli`` runs the command line."""

from topoopt.app.cli.app import main

main()
