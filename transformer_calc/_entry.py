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
    skip_plugin_loader()
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


def skip_plugin_loader() -> None:
    """With plugins disabled, pydantic's plugin loader answers no plugins, but importing it imports
    importlib.metadata (and email, zipfile, csv, socket: ~8 ms of each run, issue 39). When the
    environment disables every plugin, the loader is one function that answers the same."""
    import os

    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in ("__all__", "1", "true"):
        return
    if "pydantic.plugin._loader" in sys.modules:
        return
    import types

    loader = types.ModuleType("pydantic.plugin._loader", "tcalc: plugins disabled (PYDANTIC_DISABLE_PLUGINS)")
    loader.get_plugins = lambda: ()  # type: ignore[attr-defined]  # what pydantic's get_plugins answers then
    sys.modules["pydantic.plugin._loader"] = loader
