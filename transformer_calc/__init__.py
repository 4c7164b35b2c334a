"""tcalc: analytic cost calculator for decoder-only transformers.

    import transformer_calc as tc
    tc.memory(preset="gpt3").model_dump(mode="json")   # == `tcalc memory --preset gpt3 -f json`

The package's names params, memory, flops, mfu, inference, train, plan, rl, sweep, serve, check,
calibrate, presets, hardware, schema and load are the Python API's functions (`transformer_calc.api`), imported on
first use (PEP 562) so that `import transformer_calc` and the CLI's start-up stay light. The
modules live in folders that show the layers (docs/architecture.md): model/ and devices/ at the
bottom, then sources/ and estimators/, then results/ and render/, then cli and api; no module
shares a name with an API function.
"""

from typing import Any

__version__ = "0.1.0"

API = ("params", "memory", "flops", "mfu", "inference", "train", "plan", "rl", "sweep", "serve", "check",
       "calibrate", "presets", "hardware", "schema", "load")


def __getattr__(name: str) -> Any:
    if name in API:
        from transformer_calc import api

        return getattr(api, name)
    raise AttributeError(f"module 'transformer_calc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *API})
