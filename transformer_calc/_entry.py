"""The `tcalc` entry point: as small as possible, so that Ctrl-C at any moment of start-up (while
typer, pydantic and rich are imported) ends with exit 130 and one line, never a traceback."""

from __future__ import annotations

import sys


def main() -> None:
    # tcalc uses no pydantic plugin; looking for them reads every installed package's metadata
    # (importlib.metadata, ~10 ms of each run). The process is tcalc's own, so it opts out, unless
    # the user chose otherwise.
    import os

    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        from transformer_calc.cli import main as cli_main
    except KeyboardInterrupt:
        try:
            sys.stderr.write("Error: interrupted\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os._exit(130)  # not sys.exit: a shutdown with a KeyboardInterrupt pending dies by the signal (-2)
    cli_main()
