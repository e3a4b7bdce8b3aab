"""``python -m controlplane.cli``: the ``headroom`` command (``trace replay`` runs simulate so)."""

from controlplane.cli import main

main()
