"""The model options every estimating command shares: one model source (MODEL, --preset, --config,
--hf-config, --revision), then overrides with the seed's letters as flags (--L --D --A --E --V --K)
beside the descriptive names, and --set for any other ModelConfig field."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import PrivateAttr

from transformer_calc.errors import TcalcError, clip
from transformer_calc.requests.base import Request, opt, positive, whole

MODEL = "Model source"
OVERRIDES = "Model overrides (seed letters or descriptive names)"
OUTPUT = "Output"

# The override fields: each a ModelConfig field of the same name.
OVERRIDE_FIELDS = ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "expansion", "d_ff", "vocab_size",
                   "max_seq_len")


def settings_list(value: Any) -> Any:
    """--set KEY=VALUE (repeated) or the API's dict of ModelConfig fields -> {field: value}."""
    if isinstance(value, dict):
        from transformer_calc.model.config import ALIASES

        out: dict[str, Any] = {}
        for key, item in value.items():
            field = ALIASES.get(str(key)) or str(key)
            if field in out:
                raise ValueError(f"{field} is given twice; give it once")
            out[field] = item
        return out
    if isinstance(value, str):
        return parse_set([value])
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return parse_set(list(value))
    raise ValueError(f"takes a dict of model fields, e.g. {{'mlp': 'swiglu'}}, or KEY=VALUE text, not {type(value).__name__}")


def parse_set(items: list[str]) -> dict[str, Any]:
    """--set KEY=VALUE items -> {ModelConfig field: value}; a field given twice is an error."""
    from transformer_calc.model.config import ALIASES

    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{clip(item)}: expected KEY=VALUE, e.g. --set mlp=swiglu")
        field = ALIASES.get(key.strip(), key.strip())
        if field in out:
            raise ValueError(f"gives {field} twice; keep one")
        out[field] = _scalar(raw)
    return out


def _scalar(raw: str) -> Any:
    """A --set value: JSON scalars first (1e3, true, null), then YAML (yes/no), else the string."""
    from transformer_calc.sources.files import parse_json, parse_yaml

    if len(raw) > 4096:
        raise ValueError(f"a value of {len(raw):,} characters; give a short value")
    try:
        value = parse_json(raw, "--set")
    except TcalcError:
        try:
            value = parse_yaml(raw, "--set") if raw.strip() else raw
        except TcalcError:
            value = raw
    if value is None and raw.strip() not in ("null", "~", "Null", "NULL"):
        value = raw
    return value


class ModelRequest(Request):
    """A command that prices one model: its source and overrides."""

    _source: Any = PrivateAttr(default=None)

    model: Annotated[Any, opt(help="The model: a preset, a Hugging Face repo id (org/name[@revision]), a checkpoint folder "
                              "(config.json + *.safetensors), a .gguf file, a config.json or a tcalc YAML \\[default: none: "
                              "or --preset/--config/--hf-config].", metavar="MODEL", job=False)] = None
    revision: Annotated[str | None, opt("--revision", help="Hub revision (branch, tag or commit) of a repo id MODEL "
                                        "\\[default: main].", panel=MODEL, job=False)] = None
    hub_timeout: Annotated[float | None, opt("--hub-timeout", help="Seconds one Hub repo read may take in all "
                                             "(config, index, headers; slow answers and rate limits included) "
                                             "\\[default: TCALC_HUB_TIMEOUT, else 30].", panel=MODEL, parse=positive,
                                             job=False)] = None
    preset: Annotated[str | None, opt("--preset", help="Model preset name (see `tcalc presets`) \\[default: none: give one "
                                      "model source].", panel=MODEL, job=False)] = None
    config: Annotated[Path | None, opt("--config", help="tcalc YAML file describing the model \\[default: none].",
                                       panel=MODEL, job=False)] = None
    hf_config: Annotated[Path | None, opt("--hf-config", help="Hugging Face config.json (read offline) \\[default: none].",
                                          panel=MODEL, job=False)] = None
    n_layers: Annotated[int | None, opt("--L", "--n-layers", help="L: transformer layers \\[default: the model's].",
                                        panel=OVERRIDES, parse=whole, job=False)] = None
    d_model: Annotated[int | None, opt("--D", "--d-model", help="D: hidden size \\[default: the model's].",
                                       panel=OVERRIDES, parse=whole, job=False)] = None
    n_heads: Annotated[int | None, opt("--A", "--n-heads", help="A: attention heads \\[default: the model's].",
                                       panel=OVERRIDES, parse=whole, job=False)] = None
    n_kv_heads: Annotated[int | None, opt("--kv-heads", "--n-kv-heads", help="Key/value heads (GQA/MQA) \\[default: the "
                                          "model's].", panel=OVERRIDES, parse=whole, job=False)] = None
    head_dim: Annotated[int | None, opt("--head-dim", help="Per-head width \\[default: the model's, else D/A].",
                                        panel=OVERRIDES, parse=whole, job=False)] = None
    expansion: Annotated[float | None, opt("--E", "--expansion", help="E: MLP expansion, d_ff = E*D \\[default: the "
                                           "model's].", panel=OVERRIDES, parse=positive, job=False)] = None
    d_ff: Annotated[int | None, opt("--d-ff", help="MLP inner width \\[default: the model's, else E·D].",
                                    panel=OVERRIDES, parse=whole, job=False)] = None
    vocab_size: Annotated[int | None, opt("--V", "--vocab-size", help="V: vocabulary size \\[default: the model's].",
                                          panel=OVERRIDES, parse=whole, job=False)] = None
    max_seq_len: Annotated[int | None, opt("--K", "--max-seq-len", help="K: block size (learned positions) \\[default: "
                                           "the model's].", panel=OVERRIDES, parse=whole, job=False)] = None
    text_only: Annotated[bool, opt("--text-only/--with-towers", help="A multimodal model's language model alone: its vision/audio towers and projectors dropped from every count (the result says so) \\[default: the whole model transformers builds].", panel=MODEL, job=False)] = False
    set: Annotated[dict[str, Any] | None, opt("--set", help="Any model field: --set mlp=swiglu --set tied_embeddings=false "
                                              "\\[default: none].", panel=OVERRIDES, parse=settings_list, job=False,
                                              repeat=True)] = None

    def overrides(self) -> dict[str, Any]:
        """The model fields the flags set, then --set's; one field given by both is an error."""
        out = {name: getattr(self, name) for name in OVERRIDE_FIELDS if getattr(self, name) is not None}
        for field, value in (self.set or {}).items():
            if field in out:
                flag = self.options()[field].spellings()[0]
                raise TcalcError(f"{field} is given twice: {flag} {out[field]} and --set {field}={clip(value)}; keep one")
            out[field] = value
        return out

    def settings(self) -> dict[str, Any]:
        """The command's own options (not the model's) as {name: value}, None included."""
        own = ModelRequest.model_fields
        return {name: getattr(self, name) for name in type(self).model_fields if name not in own}

    def source(self) -> Any:
        """The loaded `sources.Source` (model, job file, checkpoint), overrides applied and
        validated; loaded once per request."""
        from transformer_calc.sources.resolve import load_source

        if self._source is None:
            import dataclasses

            from transformer_calc.requests.base import checked_job

            src = load_source(self.model, preset=self.preset, config=self.config, hf_config=self.hf_config,
                              revision=self.revision, overrides=self.overrides(), text_only=self.text_only,
                              hub_timeout=self.hub_timeout)
            from transformer_calc.results.common import check_checkpoint

            check_checkpoint(src.model, src.checkpoint)
            self._source = dataclasses.replace(src, job=checked_job(src.job, type(self))) if src.job is not None else src
        return self._source

    def command_text(self) -> str | None:
        """The model source and overrides as they would be typed again (plan's best_command), or
        None for a ModelConfig or a dict (nothing to type)."""
        import shlex

        from transformer_calc.model.config import ModelConfig

        if isinstance(self.model, (ModelConfig, dict)):
            return None
        words: list[str] = []
        if self.model is not None:
            words = [str(self.model)]
        for name in ("revision", "preset", "config", "hf_config"):
            if getattr(self, name) is not None:
                words += [f"--{name.replace('_', '-')}", str(getattr(self, name))]
        for name in OVERRIDE_FIELDS:
            if getattr(self, name) is not None:
                words += [self.options()[name].spellings()[0], str(getattr(self, name))]
        for key, value in (self.set or {}).items():
            words += ["--set", f"{key}={value}"]
        return shlex.join(words)
