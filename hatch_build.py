"""Build hook: the wheel carries the preset YAML and its JSON form, made here at build time.

tcalc reads `presets/<name>.json` when it is there (the standard library's json parses it in a
few milliseconds; PyYAML needs tens) and the YAML otherwise (a source checkout). The YAML stays
the single source of truth; tests/test_wheel.py checks that the JSON in the wheel equals it.
Nothing is written outside the build's own temporary directory, and tcalc writes no cache.
"""

from __future__ import annotations

import json
import os
import tempfile

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PRESET_FILES = ("models", "hardware", "prices")


class PresetsAsJSON(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel":
            return
        import yaml

        out = tempfile.mkdtemp(prefix="tcalc-presets-")
        for name in PRESET_FILES:
            with open(os.path.join(self.root, "presets", f"{name}.yaml"), encoding="utf-8") as fh:
                data = yaml.safe_load(fh)
            path = os.path.join(out, f"{name}.json")
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(data, fh, ensure_ascii=False)
            build_data["force_include"][path] = f"transformer_calc/presets/{name}.json"
