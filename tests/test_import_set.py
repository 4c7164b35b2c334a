"""The import set of the common commands (issue 39): a request imports what it needs, not what
tcalc could do. Start-up time depends on the machine; which modules a command imports does not, so
this test guards the set, never the time (bench/startup.py measures the time).

Each case runs the command in a fresh interpreter, in-process (`transformer_calc.cli.run`), as the
`tcalc` entry point starts it (pydantic's plugins disabled), and lists the modules it must not have
imported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO

# What no preset-based estimate needs: the Hugging Face config.json readers and the Hub, checkpoint
# headers, the sequence-mixer modules (a model without mixers), tcalc rl's estimator, the other doors.
NEVER = (
    "transformer_calc.sources.hf", "transformer_calc.sources.hf_base", "transformer_calc.sources.hf_2024",
    "transformer_calc.sources.hf_2025", "transformer_calc.sources.hf_hybrid", "transformer_calc.sources.hf_gemma4",
    "transformer_calc.sources.hf_deepseek_v4", "transformer_calc.sources.hf_towers", "transformer_calc.sources.hf_gemma3n",
    "transformer_calc.sources.hub", "transformer_calc.sources.gguf", "transformer_calc.sources.safetensors",
    "transformer_calc.estimators.mixers.deltanet", "transformer_calc.estimators.mixers.mamba2",
    "transformer_calc.estimators.mixers.mamba", "transformer_calc.estimators.mixers.shortconv",
    "transformer_calc.estimators.mixers.lightning", "transformer_calc.estimators.mixers.kda",
    "transformer_calc.estimators.mixers.olmo_gdn",
    "transformer_calc.estimators.rl", "transformer_calc.web", "transformer_calc.mcp_server", "transformer_calc.api",
    # Gemma 4's training module (a Gemma 4 model only), a checkpoint's module (a source with a checkpoint
    # only), the requests of commands not invoked (tcalc train, plan, calibrate)
    "transformer_calc.estimators.training.gemma4", "transformer_calc.model.checkpoint",
    "transformer_calc.requests.train", "transformer_calc.requests.calibrate",
    "huggingface_hub", "gguf", "numpy", "matplotlib", "torch", "transformers", "starlette", "mcp",
    # pydantic's plugin loader imports importlib.metadata (and email, zipfile, ...); the entry point
    # disables plugins, so neither is imported (_entry.skip_plugin_loader)
    "importlib.metadata", "email",
)
# JSON output is written without rich (a table needs it)
JSON_NEVER = ("rich", "rich.console", "rich.table")

CASES = [
    (["memory", "--preset", "gpt3", "-f", "json"], ("transformer_calc.estimators.deepseek_v4",)),
    (["memory", "--preset", "llama-2-7b", "--T", "8", "--sp", "--recompute", "selective", "--gpu", "a100-80gb",
      "-f", "json"], ()),
    (["params", "--preset", "llama-2-7b", "-f", "json"],
     ("transformer_calc.estimators.training.memory", "transformer_calc.estimators.flops",
      "transformer_calc.estimators.inference.roofline")),
    (["flops", "--preset", "gpt3", "-f", "json"], ("transformer_calc.estimators.inference.roofline",)),
    (["inference", "--preset", "falcon-40b", "--T", "4", "-f", "json"], ()),
    (["sweep", "--preset", "llama-2-7b", "--B", "1,2", "--T", "1,2", "--gpu", "a100-80gb", "-f", "csv"], ()),
]

SCRIPT = """
import io, json, os, sys, contextlib
os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"  # as the tcalc entry point sets it
from transformer_calc._entry import skip_plugin_loader
skip_plugin_loader()
from transformer_calc import cli
argv, forbidden = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = cli.run(argv)
print(json.dumps({"code": code, "imported": sorted(m for m in forbidden if m in sys.modules)}))
"""


@pytest.mark.parametrize("argv,extra", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_common_command_imports_only_what_it_needs(argv: list[str], extra: tuple[str, ...]) -> None:
    forbidden = [*NEVER, *extra, *(JSON_NEVER if "json" in argv or "csv" in argv else ())]
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(argv), json.dumps(forbidden)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    assert answer["code"] == 0, proc.stderr
    assert answer["imported"] == [], f"tcalc {' '.join(argv)} imported {answer['imported']}"


def test_the_plugin_loader_is_skipped_only_when_plugins_are_disabled() -> None:
    """With PYDANTIC_DISABLE_PLUGINS unset (or naming some plugins only), pydantic's own loader runs."""
    script = ("import os, sys\n"
              "os.environ.pop('PYDANTIC_DISABLE_PLUGINS', None)\n"
              "from transformer_calc._entry import skip_plugin_loader\n"
              "skip_plugin_loader()\n"
              "import pydantic.plugin._loader as loader\n"
              "print(hasattr(loader, 'entry_points'))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"
