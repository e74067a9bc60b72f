"""``python -m topoopt.cli`` runs the command line."""

from topoopt.cli.app import main

main()
