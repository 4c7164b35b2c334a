"""tcalc: analytic cost calculator for decoder-only transformers.

    import transformer_calc as tc
    tc.memory(preset="gpt3").model_dump(mode="json")   # == `tcalc memory --preset gpt3 -f json`

The package's names params, memory, flops, mfu, inference, train, plan, sweep, serve, check,
presets, hardware and load are the Python API's functions (`transformer_calc.api`), imported on
first use so that `import transformer_calc` and the CLI's start-up stay light. Estimator modules
of the same names stay importable by their dotted path (`from transformer_calc.memory import
training_memory`); `from transformer_calc import memory` gives the function, not the module.
"""

import sys
import types

__version__ = "0.1.0"

API = ("params", "memory", "flops", "mfu", "inference", "train", "plan", "sweep", "serve", "check", "presets",
       "hardware", "load")


class _Package(types.ModuleType):
    """The package object: an API name resolves to the API function, even once the submodule of
    the same name is imported (the import system's binding of the submodule is kept out)."""

    def __getattr__(self, name: str):  # only when ordinary lookup fails (PEP 562 semantics)
        if name in API:
            api = sys.modules.get("transformer_calc.api")
            if api is None:
                from transformer_calc import api
            if hasattr(api, name):
                return getattr(api, name)
        raise AttributeError(f"module 'transformer_calc' has no attribute {name!r}")

    def __setattr__(self, name: str, value: object) -> None:
        if name in API and isinstance(value, types.ModuleType):
            return  # the submodule stays in sys.modules under its dotted name
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *API})


sys.modules[__name__].__class__ = _Package
