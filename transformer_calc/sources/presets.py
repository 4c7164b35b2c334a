"""Preset data (presets/*.yaml) and the model sources a command can take.

Presets are read once, lazily, when a command asks for them: the JSON form the wheel carries
(hatch_build.py), or the YAML with the safe loader in a source checkout. The data directory is `transformer_calc/presets` inside an installed wheel (hatch
force-includes the repository's `presets/`) and the repository's `presets/` in a source checkout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from transformer_calc.model.config import ModelConfig, build_model, merge_spec
from transformer_calc.errors import TcalcError, UnknownNameError, did_you_mean

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # transformer_calc/


def data_dir() -> Path:
    """Where presets/*.yaml live (wheel: inside the package; checkout: the repository root)."""
    for candidate in (_PACKAGE_DIR / "presets", _PACKAGE_DIR.parent / "presets"):
        if (candidate / "models.yaml").is_file():
            return candidate
    raise TcalcError("preset data not found: reinstall tcalc (presets/models.yaml is missing)")


def safe_load_yaml(text: str, where: str) -> Any:
    """yaml.safe_load (C loader when available); syntax errors name the line and column."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader, never the full loader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        pos = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or str(exc)
        if "could not determine a constructor" in str(exc):
            problem = "tags such as !!python/object are refused (safe loading only)"
        raise TcalcError(f"{where}: invalid YAML{pos}: {problem}") from None
    except yaml.YAMLError as exc:
        raise TcalcError(f"{where}: invalid YAML: {exc}") from None


@cache
def _load_data(filename: str) -> dict[str, Any]:
    """A preset file, parsed once per process: its JSON form when the wheel carries one (built
    from the YAML at build time by hatch_build.py; fast to parse), else the YAML itself. tcalc
    writes no cache: nothing outside what the user asks for."""
    path = data_dir() / filename
    built = path.with_suffix(".json")
    if built.is_file():
        data = json.loads(built.read_text(encoding="utf-8"))
    else:
        data = safe_load_yaml(path.read_text(encoding="utf-8"), str(path))
    if not isinstance(data, dict):
        raise TcalcError(f"{path}: expected a mapping at the top level")
    return data


# ---------------------------------------------------------------------------- model presets
@cache
def model_presets() -> dict[str, dict[str, Any]]:
    """Preset name -> entry (family, aliases, source, expected_params, model spec)."""
    return dict(_load_data("models.yaml")["models"])


@cache
def _preset_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for name, entry in model_presets().items():
        for key in (name, *entry.get("aliases", ())):
            index[_norm(key)] = name
    return index


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def resolve_preset(name: str) -> str:
    """Canonical preset name for a name or alias (case-insensitive), with did-you-mean."""
    found = _preset_index().get(_norm(name))
    if found is None:
        raise UnknownNameError("preset", name, model_presets())
    return found


def preset_spec(name: str) -> dict[str, Any]:
    canonical = resolve_preset(name)
    entry = model_presets()[canonical]
    from transformer_calc.sources.hf_fused import FUSED_LINEARS

    # the module layout of the family's modeling code (GPT-3 is read as GPT-2, as verify_presets does)
    family = entry.get("hf_model_type") or ("gpt2" if entry.get("family") == "gpt3" else None)
    fused = FUSED_LINEARS.get(family, {}) if isinstance(family, str) else {}
    seq = {"train_seq_len": entry["train_seq_len"]} if "train_seq_len" in entry else {}
    return {"name": canonical, "source": entry.get("source"), **fused, **seq, **entry["model"]}


def train_seq_len_source(name: str | None) -> str | None:
    """Where a preset's documented pre-training length (`train_seq_len`) is stated, if it is a preset."""
    if not name:
        return None
    try:
        return model_presets()[resolve_preset(name)].get("train_seq_len_source")
    except TcalcError:
        return None


def preset_model(name: str) -> ModelConfig:
    return build_model(preset_spec(name), where=f"preset {name}")


# ---------------------------------------------------------------------------- hardware
@cache
def hardware_table() -> dict[str, Any]:
    from transformer_calc.devices.hardware import parse_hardware_table

    return parse_hardware_table(_load_data("hardware.yaml"))


def gpu(name: str) -> Any:
    from transformer_calc.devices.hardware import resolve_gpu

    return resolve_gpu(name, hardware_table())


@cache
def price_table() -> tuple[Any, ...]:
    """The shipped price table (presets/prices.yaml; devices/prices.py)."""
    from transformer_calc.devices.prices import parse_price_table

    return tuple(parse_price_table(_load_data("prices.yaml"), "presets/prices.yaml"))


def prices_file(path: Path) -> list[Any]:
    """A user's prices file (`--prices FILE`): the price table's schema, read as hostile input."""
    from transformer_calc.devices.prices import parse_price_table
    from transformer_calc.sources.files import clip, parse_yaml

    where = f"--prices {clip(str(path))}"
    return parse_price_table(parse_yaml(read_text_file(path, "--prices"), where), where)


# ---------------------------------------------------------------------------- user files
def read_text_file(path: Path, what: str) -> str:
    """Read a user's file (transformer_calc.sources.files: regular files only, size-capped)."""
    from transformer_calc.sources.files import read_user_file

    return read_user_file(path, what)


def load_json_file(path: Path, what: str, *, non_finite: bool = False) -> Any:
    """A user's JSON file; `non_finite` for a Hugging Face config.json (files.parse_json)."""
    from transformer_calc.sources.files import clip, parse_json

    return parse_json(read_text_file(path, what), f"{what} {clip(str(path))}", non_finite=non_finite)


def hf_spec(path: Path) -> dict[str, Any]:
    """A model spec from a saved Hugging Face config.json (offline; see transformer_calc.sources.hf)."""
    from transformer_calc.sources.hf import from_hf_config

    data = load_json_file(path, "--hf-config", non_finite=True)
    if not isinstance(data, dict):
        raise TcalcError(f"--hf-config {str(path)!r}: expected a JSON object (a config.json)")
    return from_hf_config(data)


JOB_SECTIONS = ("model", "training", "inference", "checks", "cost", "profile")  # profile: a file, tcalc calibrate's
# A job file's cost: section (issue 40): what a run costs, read by `tcalc train` and `tcalc serve`
# under the options' names (requests/cost.py); a flag wins over it. `prices` is relative to the file.
COST_KEYS = ("price_per_gpu_hour", "price_kind", "prices", "pue", "node_overhead", "grid_intensity_g_per_kwh",
             "interruptions_per_gpu_day", "storage_gb_s", "checkpoint_mode", "checkpoint_interval_s", "restart_s")


@dataclass(frozen=True)
class JobFile:
    """A tcalc YAML file: the model spec and the raw (canonical-key) sections for the commands."""

    path: Path
    model: dict[str, Any]
    training: dict[str, Any] = field(default_factory=dict)
    inference: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    sections: tuple[str, ...] = ()
    cost: dict[str, Any] = field(default_factory=dict)
    profile: Path | None = None  # a calibrated time profile (`tcalc calibrate --output`), relative to the file


def load_job(path: Path, flag: str | None = "--config") -> JobFile:
    """Read a job file.

    Accepted shapes: model fields at the top level (a model file); or sections `model:` (fields,
    optionally `preset: NAME` or `hf_config: PATH` relative to the file, which the fields
    override), `training:`, `inference:`, `checks:`, `cost:` (COST_KEYS), `profile: FILE` (a
    calibrated time profile, relative to the file). Unknown sections and keys are errors with
    did-you-mean. YAML is read with the safe loader only.
    """
    from transformer_calc.model.config import CHECK_KEYS, INFERENCE_KEYS, TRAINING_KEYS, canonical_section

    from transformer_calc.sources.files import clip, parse_yaml

    what = flag or "file"
    where = f"{flag} {clip(str(path))}" if flag else clip(str(path))[1:-1]
    data = parse_yaml(read_text_file(path, what), where)
    if not isinstance(data, dict):
        raise TcalcError(f"{where}: expected a mapping of model fields or a model: section")
    if "model" not in data:
        stray = [k for k in JOB_SECTIONS if k in data]
        if stray:
            raise TcalcError(f"{where}: has {stray[0]}: but no model: section; add model: (fields or preset:)")
        return JobFile(path=path, model=_model_section(dict(data), path, where))
    for key in data:
        if key not in JOB_SECTIONS:
            hint = did_you_mean(key, JOB_SECTIONS, n=1, cutoff=0.5) or f"sections are {', '.join(JOB_SECTIONS)}"
            raise TcalcError(f"{where}: unknown section {clip(key)}; {hint}")
    if not isinstance(data["model"], dict):
        raise TcalcError(f"{where}: model: must be a mapping of fields")
    profile = data.get("profile")
    if profile is not None and not isinstance(profile, str):
        raise TcalcError(f"{where}: profile: must be a file name (a profile tcalc calibrate wrote), not {clip(profile)}")
    return JobFile(
        path=path,
        model=_model_section(dict(data["model"]), path, where),
        training=canonical_section(f"{where} training", data.get("training"), TRAINING_KEYS),
        inference=canonical_section(f"{where} inference", data.get("inference"), INFERENCE_KEYS),
        checks=canonical_section(f"{where} checks", data.get("checks"), CHECK_KEYS),
        sections=tuple(k for k in JOB_SECTIONS if k in data),
        cost=_cost_section(canonical_section(f"{where} cost", data.get("cost"), list(COST_KEYS)), path),
        profile=None if profile is None else path.parent / profile,
    )


def _cost_section(section: dict[str, Any], path: Path) -> dict[str, Any]:
    """The cost: section with `prices` read relative to the job file."""
    if section.get("prices") is not None:
        section["prices"] = path.parent / str(section["prices"])
    return section


def _model_section(model: dict[str, Any], path: Path, where: str) -> dict[str, Any]:
    preset, hf = model.pop("preset", None), model.pop("hf_config", None)
    if preset is not None and hf is not None:
        raise TcalcError(f"{where}: give model.preset or model.hf_config, not both")
    if preset is not None:
        return merge_spec(preset_spec(str(preset)), model)
    if hf is not None:
        return merge_spec(hf_spec(path.parent / str(hf)), model)
    return model
