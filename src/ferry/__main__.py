"""``python -m ferry``: the same as the ``ferry`` command."""

from ferry.cli import run

run()
