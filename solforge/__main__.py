"""``python -m solforge`` is the ``solforge`` command (for machines where the console script is not installed)."""

from solforge.cli import main

main()
