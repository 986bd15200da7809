"""``python -m privmarg``: the command line, as the ``privmarg`` script runs it."""

from privmarg.cli import run

run()
