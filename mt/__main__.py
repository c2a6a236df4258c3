"""`python -m mt` runs the same CLI as the `mt` command."""

from mt.cli import main

main()
