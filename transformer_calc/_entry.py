"""The `tcalc` entry point: as small as possible, so that Ctrl-C at any moment of start-up (while
typer, pydantic and rich are imported) ends with exit 130 and one line, never a traceback."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from transformer_calc.cli import main as cli_main
    except KeyboardInterrupt:
        try:
            sys.stderr.write("Error: interrupted\n")
        except (OSError, ValueError):
            pass
        sys.exit(130)
    cli_main()
