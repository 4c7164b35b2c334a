"""The one resolver of a model source, for the CLI and the Python API.

A model is given once, as
- MODEL, a string: a path (a tcalc YAML job file, a Hugging Face config.json, a checkpoint
  folder holding config.json and *.safetensors, a .gguf file), else a preset name, else a Hugging
  Face repo id `org/name[@revision]` (a local path wins over a repo id of the same spelling, as
  in transformers' from_pretrained);
- or one of --preset, --config (tcalc YAML), --hf-config (config.json);
- or only the model flags (--L --D --A --V ...).

A checkpoint (a folder's or repo's safetensors headers, a GGUF file) gives the bytes actually
stored beside the model (`Source.checkpoint`); when model fields are overridden the stored bytes
no longer describe the model and are not used (`Source.checkpoint_note` says so).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from transformer_calc.model.config import ModelConfig, build_model, merge_spec
from transformer_calc.errors import TcalcError, UnknownNameError, clip

if TYPE_CHECKING:  # a checkpoint's module only for a source that has one (issue 39)
    from transformer_calc.model.checkpoint import Checkpoint

CONFIG_FILE = "config.json"
JOB_SUFFIXES = (".yaml", ".yml")
MAX_MODEL_CHARS = 4096  # PATH_MAX on Linux; a repo id is at most 96 + 1 + 96 (+ @revision)


@dataclass(frozen=True)
class Source:
    """A resolved model: the config, its job file, its checkpoint (if any) and where it came from."""

    model: ModelConfig
    job: Any  # presets.JobFile | None
    checkpoint: Checkpoint | None
    checkpoint_note: str | None  # why a checkpoint's bytes are not known or not used
    where: str


def _presets() -> Any:
    return importlib.import_module("transformer_calc.sources.presets")  # the module (the package's name is the API's)


def _hf_config_spec(path: Path, what: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec, the raw config) of a config.json."""
    from transformer_calc.sources.hf import from_hf_config

    data = _presets().load_json_file(path, what, non_finite=True)  # Infinity in a config.json is JSON to transformers
    if not isinstance(data, dict):
        raise TcalcError(f"{what} {clip(str(path))}: expected a JSON object (a config.json)")
    return from_hf_config(data), data


def _n_layers(spec: dict[str, Any]) -> int | None:
    n = spec.get("n_layers")
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def _folder(path: Path) -> tuple[dict[str, Any], Checkpoint | None, str | None]:
    from transformer_calc.sources.safetensors import read_folder

    config = path / CONFIG_FILE
    if not config.is_file():
        ggufs = sorted(path.glob("*.gguf"))[:2]
        if len(ggufs) == 1:
            return _gguf(ggufs[0])
        raise TcalcError(
            f"model folder {clip(str(path))} has no {CONFIG_FILE}"
            + (" and several .gguf files; name one" if ggufs else "; give a Hugging Face checkpoint folder, a file or a preset")
        )
    spec, raw = _hf_config_spec(config, "model")
    if not spec.get("name"):
        spec["name"] = path.resolve().name
    ckpt = read_folder(path, raw, lambda p, what: _presets().load_json_file(p, what))
    if ckpt is not None:
        ckpt = _with_layers(ckpt, spec, raw, path)
    note = None if ckpt is not None else f"{clip(str(path))} holds no .safetensors file: the stored bytes are unknown"
    return spec, ckpt, note


def _with_layers(ckpt: Checkpoint, spec: dict[str, Any], raw: dict[str, Any], where: Path | str) -> Checkpoint:
    """Re-classify MTP layers when the config's layer count was nested (multimodal text_config)."""
    if raw.get("num_hidden_layers") == _n_layers(spec):
        return ckpt
    from dataclasses import replace

    from transformer_calc.model.checkpoint import component_of

    n = _n_layers(spec)
    return replace(ckpt, tensors=tuple(replace(t, component=component_of(t.name, n)) for t in ckpt.tensors))


def _gguf(path: Path) -> tuple[dict[str, Any], Checkpoint | None, str | None]:
    from transformer_calc.sources.gguf import read_gguf

    spec, ckpt = read_gguf(path)
    return spec, ckpt, None


def _hub(repo: str, revision: str | None, timeout_s: float | None) -> tuple[dict[str, Any], Checkpoint | None, str | None]:
    """A repo id: one network operation, under one deadline (`hub.Deadline`)."""
    from transformer_calc.sources import hub
    from transformer_calc.sources.files import parse_json
    from transformer_calc.sources.hf import from_hf_config

    deadline = hub.Deadline(hub.timeout_s(timeout_s))
    raw_bytes = hub.download(repo, CONFIG_FILE, revision, deadline)
    where = f"{repo} {CONFIG_FILE}"
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError:
        raise TcalcError(f"{where} is not UTF-8 text") from None
    raw = parse_json(text, where, non_finite=True)  # Infinity in a config.json is JSON to transformers
    if not isinstance(raw, dict):
        raise TcalcError(f"{where}: expected a JSON object (a config.json)")
    spec = from_hf_config(raw)
    spec.setdefault("name", repo)
    if spec.get("name") in (None, ""):
        spec["name"] = repo
    ckpt, note = hub.repo_checkpoint(repo, revision, raw, _n_layers(spec), deadline)
    return spec, ckpt, note


def _from_text(text: str, revision: str | None, hub_timeout: float | None = None) -> tuple[dict[str, Any], Any, Checkpoint | None, str | None, str]:
    """(spec, job, checkpoint, note, where) of a MODEL string."""
    if not isinstance(text, str) or not text.strip():
        raise TcalcError("MODEL is empty; give a preset name, a path or a Hugging Face repo id (org/name)")
    if len(text) > MAX_MODEL_CHARS:
        raise TcalcError(f"MODEL {clip(text, 40)} is {len(text):,} characters; no path, preset or Hub repo id is that long "
                         f"(at most {MAX_MODEL_CHARS:,}); check the argument")
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # "~user" of no such user (or no home directory): not a path, read as a name
        path = Path(text)
    where = f"MODEL {clip(text)}"
    try:
        local = path.exists() or path.is_symlink()
    except (OSError, ValueError):  # a name too long for a path (ENAMETOOLONG), a NUL byte: not a path
        local = False
    if local and hub_timeout is not None:
        raise TcalcError(f"--hub-timeout applies to a Hub repo id, not to the local path {clip(text)}; drop it")
    if local:
        if revision is not None:
            raise TcalcError(f"--revision {clip(revision)} applies to a Hub repo id, not to the local path {clip(text)}; drop it")
        return _from_path(path, text, where)
    presets = _presets()
    try:
        name = presets.resolve_preset(text)
    except UnknownNameError as exc:
        return _from_repo_id(text, revision, hub_timeout, exc.known)
    if revision is not None:
        raise TcalcError(f"--revision {clip(revision)} applies to a Hub repo id, not to the preset {name}; drop it")
    if hub_timeout is not None:
        raise TcalcError(f"--hub-timeout applies to a Hub repo id, not to the preset {name}; drop it")
    return presets.preset_spec(name), None, None, None, f"preset {name}"


def _from_path(path: Path, text: str, where: str) -> tuple[dict[str, Any], Any, Checkpoint | None, str | None, str]:
    """A local MODEL: a checkpoint folder, a .gguf file, a config.json or a tcalc job file."""
    if path.is_dir():
        spec, ckpt, note = _folder(path)
        return spec, None, ckpt, note, where
    suffix = path.suffix.lower()
    if suffix == ".gguf":
        spec, ckpt, note = _gguf(path)
        return spec, None, ckpt, note, where
    if suffix == ".json":
        return _hf_config_spec(path, "model")[0], None, None, None, where
    if suffix in JOB_SUFFIXES:
        job = _presets().load_job(path, flag=None)
        return job.model, job, None, None, where
    if suffix == ".safetensors":
        raise TcalcError(f"{clip(text)} is one shard; give the folder that holds it and its {CONFIG_FILE}")
    raise TcalcError(
        f"{clip(text)}: give a tcalc .yaml job file, a Hugging Face config.json, a checkpoint folder or a .gguf file"
    )


def _from_repo_id(text: str, revision: str | None, hub_timeout: float | None,
                  known: Any) -> tuple[dict[str, Any], Any, Checkpoint | None, str | None, str]:
    """A MODEL that is neither a path nor a preset: a Hub repo id (org/name[@revision]), else refused with a hint."""
    from transformer_calc.sources import hub

    parsed = hub.parse_repo_id(text) if "@" in text or "/" in text else None
    if parsed is None:
        if "/" in text or Path(text).suffix:
            raise TcalcError(f"{clip(text)} does not exist; give an existing path, a preset or a Hub repo id (org/name)") from None
        from transformer_calc.errors import did_you_mean

        hint = did_you_mean(text, known, cutoff=0.5) or "see `tcalc presets`"
        raise TcalcError(
            f"MODEL {clip(text)} is not a path, a preset or a Hugging Face repo id (org/name); {hint}"
        ) from None
    repo, rev = parsed
    if rev is not None and revision is not None and rev != revision:
        raise TcalcError(f"two revisions: {clip(text)} and --revision {clip(revision)}; give one")
    chosen = rev or revision
    if chosen is not None:  # it becomes a path in the cache (refs/<revision>)
        chosen = hub.check_revision(chosen, "--revision" if rev is None else "MODEL's @revision")
    spec, ckpt, note = _hub(repo, chosen, hub_timeout)
    return spec, None, ckpt, note, f"{repo}@{rev or revision or 'main'}"


def load_source(
    model: Any = None,
    *,
    preset: str | None = None,
    config: Path | None = None,
    hf_config: Path | None = None,
    revision: str | None = None,
    overrides: dict[str, Any] | None = None,
    text_only: bool = False,
    hub_timeout: float | None = None,
) -> Source:
    """The model of one invocation: one source plus overrides, validated (module docstring).
    `model` is the text of a MODEL argument, or (the Python API's forms) a path, a ModelConfig or
    a dict of ModelConfig fields.
    `text_only` drops a multimodal model's towers (vision/audio encoders, projectors) from every
    count: the language model alone (`model.config.Towers.text_only`; results say so)."""
    if isinstance(model, (ModelConfig, dict)):
        return _from_object(model, preset=preset, config=config, hf_config=hf_config, revision=revision,
                            overrides=overrides, text_only=text_only)
    if model is not None and not isinstance(model, str):
        if not hasattr(model, "__fspath__"):
            raise TcalcError(f"model must be a preset name, a path, a repo id, a ModelConfig or a dict, not {type(model).__name__}")
        model = str(model)
    given = [name for name, v in (("MODEL", model), ("--preset", preset), ("--config", config), ("--hf-config", hf_config))
             if v is not None]
    if len(given) > 1:
        raise TcalcError(f"give one model source, not {' and '.join(given)}")
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if hub_timeout is not None and model is None:
        raise TcalcError("--hub-timeout needs a Hugging Face repo id as MODEL (org/name)")
    if revision is not None and model is None:
        raise TcalcError(f"--revision {clip(revision)} needs a Hugging Face repo id as MODEL (org/name)")
    spec, job, ckpt, note, where = _named_spec(model, preset, config, hf_config, revision, hub_timeout, bool(overrides))
    if text_only and isinstance(spec.get("towers"), dict):
        spec = {**spec, "towers": {**spec["towers"], "text_only": True}}
    if overrides:
        spec = merge_spec(spec, overrides)
        spec.setdefault("name", None)
        if ckpt is not None:
            ckpt, note = None, "model fields were overridden, so the checkpoint's stored bytes no longer describe it and are not used"
    return Source(build_model(spec, where=where), job, ckpt, note, where)


def _from_object(model: Any, *, preset: Any, config: Any, hf_config: Any, revision: Any, overrides: Any,
                 text_only: bool) -> Source:
    """The Python API's forms: a ModelConfig or a dict of its fields, with overrides."""
    others = [n for n, v in (("preset", preset), ("config", config), ("hf_config", hf_config), ("revision", revision))
              if v is not None]
    if others:
        raise TcalcError(f"give one model source, not a model and {others[0]}")
    if isinstance(model, ModelConfig):
        # re-validated where it enters: a ModelConfig changed with model_copy(update=...) or
        # model_construct(...) skipped validation (n_layers=-12 would count -45,669,120 parameters)
        build_model(model.model_dump(exclude={"name", "source"}), where="model")
    if text_only:  # the towers dropped: the model's own fields, towers marked text_only
        fields = dict(model.given) if isinstance(model, ModelConfig) else dict(model)
        if isinstance(fields.get("towers"), (dict, BaseModel)):
            towers = fields["towers"].model_dump() if isinstance(fields["towers"], BaseModel) else fields["towers"]
            model = fields | {"towers": {**towers, "text_only": True}}
    base = dict(model.given) | {"name": None} if isinstance(model, ModelConfig) and overrides else None
    if base is None and not overrides:
        return Source(model if isinstance(model, ModelConfig) else build_model(dict(model)), None, None, None, "model")
    spec = merge_spec(base if base is not None else dict(model), {k: v for k, v in (overrides or {}).items()
                                                                  if v is not None})
    return Source(build_model(spec), None, None, None, "model")


def _named_spec(model: str | None, preset: str | None, config: Any, hf_config: Any, revision: str | None,
                hub_timeout: float | None, overridden: bool) -> tuple[dict[str, Any], Any, Any, Any, str]:
    """The spec of the one source named (MODEL, --preset, --config or --hf-config), its job, checkpoint, note, where."""
    presets = _presets()
    job, ckpt, note = None, None, None
    if model is not None:
        spec, job, ckpt, note, where = _from_text(model, revision, hub_timeout)
    elif preset is not None:
        spec, where = presets.preset_spec(preset), f"--preset {preset}"
    elif config is not None:
        job = presets.load_job(config)
        spec, where = job.model, f"--config {str(config)!r}"
    elif hf_config is not None:
        spec, where = presets.hf_spec(hf_config), f"--hf-config {str(hf_config)!r}"
    elif overridden:
        spec, where = {}, "model"
    else:
        raise TcalcError(
            "no model given; name one: a preset (see `tcalc presets`), a Hugging Face repo id (org/name), a "
            "checkpoint folder, a .gguf file, a config.json or a tcalc YAML (or --L --D --A --V)"
        )
    return spec, job, ckpt, note, where
