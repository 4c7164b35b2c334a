"""What each command returns, composed from the estimators: one module per command (params, memory,
flops and mfu, inference, serve, train and plan, check, catalog, sweep) and the parts they share
(common).

`RESULT_TYPES` is the one table of which class is which command's result: `tcalc schema`,
`tc.schema` and tools/schemas.py read it. The modules are imported on first use, so that the CLI
starts without pydantic.
"""

from __future__ import annotations

from typing import Any

# command -> (its module in results/, its result class)
RESULT_TYPES: dict[str, tuple[str, str]] = {
    "params": ("params", "ParamsResult"),
    "memory": ("memory", "MemoryResult"),
    "flops": ("flops", "FlopsResult"),
    "mfu": ("flops", "MfuResult"),
    "inference": ("inference", "InferenceResult"),
    "serve": ("serve", "ServeResult"),
    "train": ("train", "TrainResult"),
    "plan": ("train", "PlanResult"),
    "rl": ("rl", "RlResult"),
    "sweep": ("sweep", "SweepResult"),
    "check": ("check", "CheckResult"),
    "calibrate": ("calibrate", "CalibrateResult"),
    "presets": ("catalog", "PresetsResult"),
    "hardware": ("catalog", "HardwareResult"),
}


def result_type(command: str) -> Any:
    """The result class of `command` (a pydantic model); an unknown command is an error with the
    nearest names."""
    import importlib

    from transformer_calc.errors import UnknownNameError

    if command not in RESULT_TYPES:
        raise UnknownNameError("command", command, RESULT_TYPES)
    module, name = RESULT_TYPES[command]
    return getattr(importlib.import_module(f"transformer_calc.results.{module}"), name)


def result_schema(command: str) -> dict[str, Any]:
    """The JSON Schema of `command`'s result as it is written (`--format json`)."""
    schema: dict[str, Any] = result_type(command).model_json_schema(mode="serialization")
    return schema
