"""What every Hugging Face config.json reader shares: the typed reader of a file's values over a
family's defaults, the family record, and the building blocks of llama-like specs (hf.py and
hf_2024.py both build on these; neither imports the other's private parts)."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from transformer_calc.errors import TcalcError


GPT2_NAMES = {  # configuration_gpt2.py / gptj / gpt_bigcode: attribute_map
    "hidden_size": "n_embd",
    "max_position_embeddings": "n_positions",
    "num_attention_heads": "n_head",
    "num_hidden_layers": "n_layer",
}


class Reader:
    """The file's values over the family defaults, read with a type check that names the key."""

    def __init__(self, model_type: str, cfg: dict[str, Any], family: Family):
        self.model_type = model_type
        self.activation: str | None = None  # the activation name as written, once read
        self.values: dict[str, Any] = dict(family.defaults)
        self.written: dict[str, str] = {}
        # Dataclass fields are set first, the other keys afterwards (configuration_utils.py:
        # __init__, then __post_init__ setattr through attribute_map), so an attribute_map name
        # or a backward-compatible keyword overrides the field it stands for.
        for key, value in sorted(cfg.items(), key=lambda kv: kv[0] in family.late):
            name = family.aliases.get(key, key)
            self.values[name] = value
            self.written[name] = key

    def _bad(self, name: str, what: str) -> TcalcError:
        from transformer_calc.sources.files import clip

        key = self.written.get(name, name)
        value = self.values.get(name)
        return TcalcError(
            f"config.json ({self.model_type}): {clip(key, 60)[1:-1]} ({clip(value)}) must be {what}; "
            f"fix {key} in the file or drop it to use the transformers default"
        )

    def int(self, name: str) -> int:
        value = self.values.get(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._bad(name, "a whole number")
        return value

    def positive(self, *names: str) -> None:
        """Each of `names` is a whole number >= 1 (a size), else one error naming it."""
        for name in names:
            if self.int(name) < 1:
                raise self._bad(name, "a whole number >= 1")

    def opt_int(self, name: str) -> builtins.int | None:
        return None if self.values.get(name) is None else self.int(name)

    def flag(self, name: str) -> bool:
        value = self.values.get(name)
        if not isinstance(value, bool):
            raise self._bad(name, "true or false")
        return value

    def text(self, name: str) -> str:
        value = self.values.get(name)
        if not isinstance(value, str):
            raise self._bad(name, "a string")
        return value

    def prob(self, name: str) -> float:
        """A dropout probability: every key is checked, whatever the others hold (0 <= p < 1)."""
        import math

        value = self.values.get(name, 0.0)
        if value is None:
            return 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._bad(name, "a number (a dropout probability)")
        if not (math.isfinite(value) and 0.0 <= value < 1.0):
            raise self._bad(name, "a dropout probability in [0, 1)")
        return float(value)

    def shape(self) -> dict[str, Any]:
        """L, D, A, V under the (aliased) standard names every family resolves to."""
        return {
            "n_layers": self.int("num_hidden_layers"),
            "d_model": self.int("hidden_size"),
            "n_heads": self.int("num_attention_heads"),
            "vocab_size": self.int("vocab_size"),
        }


@dataclass(frozen=True)
class Family:
    build: Callable[[Reader], dict[str, Any]]
    defaults: dict[str, Any]  # configuration_<type>.py field defaults of the keys we read
    dropout_keys: tuple[str, ...]
    aliases: dict[str, str] = field(default_factory=dict)  # key in the file -> name read here
    late: frozenset[str] = frozenset()  # keys transformers applies after the fields (they win)


def mlp_attention_biases(qkv: bool, out: bool, mlp: bool) -> dict[str, bool]:
    """One `bias` when all agree (so overrides of `bias` still act), else the three flags."""
    if qkv == out == mlp:
        return {"bias": qkv}
    return {"bias": False, "qkv_bias": qkv, "attn_out_bias": out, "mlp_bias": mlp}


def gated_mlp_kind(c: Reader, key: str) -> str:
    act = c.text(key)
    c.activation = act
    if act in ("silu", "swish"):
        return "swiglu"
    if act.startswith("gelu"):
        return "geglu"
    raise c._bad(key, "silu/swish (swiglu) or a gelu variant (geglu) for tcalc's gated MLP kinds")


def plain_mlp_kind(c: Reader, key: str) -> str:
    act = c.text(key)
    c.activation = act
    if act == "relu":
        return "relu"
    if "gelu" in act:  # gelu, gelu_new, gelu_pytorch_tanh, quick_gelu, ... (activations.py)
        return "gelu"
    raise c._bad(key, "relu or a gelu variant for tcalc's plain MLP kinds")


# ------------------------------------------------------------ llama-like (RMSNorm, SwiGLU, RoPE)
def llama_like(c: Reader, qkv_bias: bool, out_bias: bool, mlp_bias: bool) -> dict[str, Any]:
    """modeling_{llama,mistral,mixtral,qwen2,gemma}.py: q/k/v/o of A*head_dim and kv*head_dim,
    gate/up/down of intermediate_size, two RMSNorms per layer and a final one, RoPE (no table)."""
    return rotary_common(c, qkv_bias, out_bias, mlp_bias) | {"mlp": gated_mlp_kind(c, "hidden_act")}


def rotary_common(c: Reader, qkv_bias: bool, out_bias: bool, mlp_bias: bool) -> dict[str, Any]:
    """What the llama-like families and Phi share: separate q/k/v/o, head_dim, GQA, RoPE."""
    spec = c.shape() | {
        "d_ff": c.int("intermediate_size"),
        "max_seq_len": c.int("max_position_embeddings"),
        "positional": "rotary",
        "norm": "rmsnorm",  # weight only (Gemma's is 1 + weight: same count)
        "tied_embeddings": c.flag("tie_word_embeddings"),
    } | mlp_attention_biases(qkv_bias, out_bias, mlp_bias)
    # head_dim: `getattr(config, "head_dim", None) or hidden // heads` (Gemma's field default 256;
    # qwen2 reads it when the file has it although its config class does not declare it).
    if (head_dim := c.opt_int("head_dim")) is not None:
        spec["head_dim"] = head_dim
    # num_key_value_heads None -> num_attention_heads (configuration_*.py __post_init__)
    if (kv := c.opt_int("num_key_value_heads")) is not None:
        spec["n_kv_heads"] = kv
    return spec


LLAMA_DEFAULTS = {  # configuration_llama.py
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu",
    "max_position_embeddings": 2048, "tie_word_embeddings": False, "attention_bias": False,
    "attention_dropout": 0.0, "mlp_bias": False, "head_dim": None,
}  # fmt: skip
