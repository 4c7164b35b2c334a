"""Cross-check `tcalc flops` (default convention) against torch's FlopCounterMode, every model_type.

For each supported model_type this takes hf_params.py's config generators (a fixed-seed random
sample, `--n` runnable configs per type) and its EDGE cases (GQA, MQA, head_dim != D/A, untied and
tied heads, QKV-only biases, parallel attention, MoE, OPT's projections, minimal configs on the
transformers defaults), builds `AutoModelForCausalLM.from_config(config, attn_implementation="eager")`
(every MoE type also `experts_implementation="eager"`), puts it in training mode and runs one forward with
labels and `loss.backward()` on B sequences of S random tokens inside
`torch.utils.flop_counter.FlopCounterMode`. It requires exact equality of

    counter.get_total_flops()
    count_flops(ModelConfig.model_validate(from_hf_config(cfg)), Workload(seq_len=S, batch_size=B)).total

for the config dict as generated and for the full dict transformers saves
(`config.to_json_string(use_diff=False)`), and of `sum(p.numel() for p in model.parameters())` with
`count_params(...)` of both dicts.

Device: models of at most CPU_MAX_PARAMS parameters run on the CPU; the larger ones (the minimal
configs at transformers' default sizes) run on the meta device, where FlopCounterMode counts the
same ops from shapes alone. MoE routing picks experts from data (torch.nonzero), which the meta
device cannot run, so a MoE model too large for the CPU is skipped.

Why eager: FlopCounterMode counts no FLOPs for CPU SDPA (attn_implementation="sdpa", the transformers
default) nor for `grouped_mm` experts (Mixtral's default experts_implementation), and counts CUDA
SDPA's backward as 2.5 x its forward. Eager attention and eager experts execute every matmul as
mm/addmm/bmm, which is what tcalc's default convention counts.

Skipped (printed with the reason; their parameters are still checked): configs transformers builds
but cannot run a forward on (`forward_breaks`; `check_exclusions` runs a grid of tiny configs each
time and fails if a config breaks or runs other than it says), and MoE models too large for the CPU.
A random draw that is skipped is replaced by the next draw, so every type keeps `--n` random cases.

Needs torch and transformers (not part of the core test suite). Exits 1 on any mismatch or error.

    PYTHONPATH=. python tools/crosscheck/flops.py [--n 8] [--seed 0] [--write-docs] [-v]

`--write-docs` replaces the FLOPs section of docs/validation.md (between its marker comments).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import transformers  # noqa: E402
from hf_params import EDGE, GENERATORS  # noqa: E402
from hf_cases_hybrid import HYBRID_TYPES  # noqa: E402  (their mixers: flops_mixers.py)
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402
from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoModelForSpeechSeq2Seq, PretrainedConfig  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

from transformer_calc.model.config import ModelConfig, Workload  # noqa: E402
from transformer_calc.estimators.flops import count_flops  # noqa: E402
from transformer_calc.sources.hf import SUPPORTED_MODEL_TYPES, from_hf_config  # noqa: E402
from transformer_calc.estimators.params import count_params  # noqa: E402

CPU_MAX_PARAMS = 20_000_000  # larger models (transformers' default sizes) run on the meta device
MAX_BATCH, MAX_SEQ = 3, 24  # B and S are drawn from 1..MAX_BATCH and 1..MAX_SEQ
MAX_DRAWS = 20  # draws per wanted random case before giving up on a generator
BEGIN, END = "<!-- flops:begin -->", "<!-- flops:end -->"
REGENERATE = "PYTHONPATH=. python tools/crosscheck/flops.py --write-docs"
Cfg = dict[str, Any]


# ------------------------------------------------------------------ configs transformers cannot run
FALCON_NEW_SEQUENTIAL = (
    "transformers bug (modeling_falcon.py): new_decoder_architecture=True with parallel_attn=False "
    "builds input_layernorm and post_attention_layernorm, forward reads ln_attn and ln_mlp (with "
    "num_ln_in_parallel_attn=1: an unset mlp_layernorm_out)"
)
FALCON_OLD_PARALLEL_2LN = (
    "transformers bug (modeling_falcon.py): new_decoder_architecture=False with parallel_attn=True "
    "and num_ln_in_parallel_attn=2 builds ln_attn and ln_mlp, forward reads input_layernorm"
)
FALCON_OLD_MHA_KV = (
    "transformers bug (modeling_falcon.py): new_decoder_architecture=False with multi_query=False "
    "builds a 3·D query_key_value, forward splits K and V into num_kv_heads heads, which fails "
    "for num_kv_heads != num_attention_heads"
)
GPTJ_ROTARY = (
    "rotary_dim (default 64) > head_dim = n_embd / n_head: the rotary slice does not broadcast "
    "(apply_rotary_pos_emb)"
)
PHI_ODD_ROTARY = (
    "odd rotary width int(head_dim · partial_rotary_factor): the cos/sin tables are one column "
    "wider than the rotated slice"
)
MOE_TOO_LARGE = (
    f"MoE above {CPU_MAX_PARAMS:,} parameters (the transformers defaults): too large for a CPU run, "
    "and the meta device cannot route tokens (torch.nonzero is data-dependent)"
)
GEMMA_NO_WINDOW = "a sliding layer without a sliding_window: the mask code cannot run it"
GEMMA3_NULL_WINDOW = ("transformers bug (modeling_gemma3.py): Gemma3TextModel.forward builds the sliding mask even when "
                      "no layer slides, and create_sliding_window_causal_mask fails on sliding_window null")
GEMMA2_NULL_WINDOW = ("transformers bug (modeling_gemma2.py): Gemma2Model.forward builds the sliding mask even when no "
                      "layer slides, and create_sliding_window_causal_mask fails on sliding_window null")
GROUP_TOPK = "fewer than 2 experts per routing group: DeepSeek's group scores take the top 2 of each group"
GEMMA4_SHARED_NO_PLE = ("transformers bug (modeling_gemma4.py): Gemma4TextModel._maybe_slice_kv_shared_inputs subscripts "
                        "per_layer_inputs, None without per-layer inputs, in a forward of a model with kv-shared layers")
MROPE_SECTION = ("M-RoPE: mrope_section (the config default, for a full-size head) does not sum to the rotary half-width "
                 "of this small head: the rotary split cannot run (Qwen2.5-VL, GLM-4V)")
KNOWN_SKIPS = [  # (model_type, condition), every reason a case is skipped
    ("falcon", FALCON_NEW_SEQUENTIAL),
    ("falcon", FALCON_OLD_PARALLEL_2LN),
    ("falcon", FALCON_OLD_MHA_KV),
    ("gptj", GPTJ_ROTARY),
    ("phi", PHI_ODD_ROTARY),
    ("mixtral", MOE_TOO_LARGE),
    ("gemma2", GEMMA_NO_WINDOW),
    ("gemma2", GEMMA2_NULL_WINDOW),
    ("deepseek_v3", GROUP_TOPK),
    ("glm4_moe", GROUP_TOPK),
    ("glm4_moe_lite", GROUP_TOPK),
    ("deepseek_v32", GROUP_TOPK),
    ("glm_moe_dsa", GROUP_TOPK),
    ("gemma3_text", GEMMA_NO_WINDOW),
    ("gemma3", GEMMA_NO_WINDOW),
    ("gemma3_text", GEMMA3_NULL_WINDOW),
    ("gemma3", GEMMA3_NULL_WINDOW),
    ("qwen3", GEMMA_NO_WINDOW),
    ("qwen2_5_vl", MROPE_SECTION),
    ("glm4v", MROPE_SECTION),
    ("glm4v_moe", MROPE_SECTION),
    ("glm4v_moe", GROUP_TOPK),
    ("llama4", MOE_TOO_LARGE),
    ("gemma4_text", GEMMA4_SHARED_NO_PLE),
    ("gemma4", GEMMA4_SHARED_NO_PLE),
]
GROUPED_ROUTING = ("deepseek_v3", "glm4_moe", "glm4_moe_lite", "deepseek_v32", "glm_moe_dsa", "glm4v_moe_text")  # group top-2 scores
# Multimodal wrappers (sources.hf.WRAPPERS): built whole (AutoModelForImageTextToText) and run on text
# alone (input_ids, no images): the FLOPs are the language model's; its parameters are the whole
# model's less the towers (by module name, as hf_params.py).
from transformer_calc.sources.hf import WRAPPERS as _WRAPPERS  # noqa: E402

WRAPPERS = tuple(_WRAPPERS)
MOE_TYPES = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3", "glm4_moe", "gpt_oss", "llama4_text", "llama4",
             "ernie4_5_moe", "hunyuan_v1_moe", "minimax_m2", "glm4_moe_lite", "deepseek_v32", "glm_moe_dsa",
             "qwen3_vl_moe", "glm4v_moe", "kimi_k25", "mimo_v2_flash", "gemma4_text", "gemma4",
             "deepseek_v4")
ALL_EXPERTS = ("llama4_text", "llama4")  # HF runs every expert on every token (modeling_llama4.py)


def forward_breaks(config: PretrainedConfig) -> str | None:
    """Why transformers 5.23 builds this config but cannot run its forward, or None.

    falcon: modeling_falcon.py builds and runs from different keys (transformers bugs):
    FalconDecoderLayer.__init__ picks its norms from parallel_attn and num_ln_in_parallel_attn,
    forward() from new_decoder_architecture and num_ln_in_parallel_attn; FalconAttention sizes the
    old architecture's MHA query_key_value as 3·D but splits K and V into num_kv_heads heads.
    gptj and phi: rotary widths the rotary code cannot apply. gemma4: kv-shared layers without
    per-layer inputs (GEMMA4_SHARED_NO_PLE). `check_exclusions` runs a grid of
    these keys on every run: exactly the configs named here must fail.
    """
    c = config.get_text_config() if config.model_type in WRAPPERS else config
    if c.model_type in GROUPED_ROUTING and c.n_routed_experts // max(c.n_group, 1) < 2:
        return GROUP_TOPK
    if c.model_type in ("qwen2_5_vl_text", "glm4v_text", "glm4v_moe_text"):
        rope = getattr(c, "rope_parameters", None) or {}
        # modeling_{qwen2_5_vl,glm4v,glm4v_moe}.py: rope_parameters.get("mrope_section", default)
        section = rope.get("mrope_section") or ([16, 24, 24] if c.model_type == "qwen2_5_vl_text" else [8, 12, 12])
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        if section and 2 * sum(section) != int(head_dim * rope.get("partial_rotary_factor", 1.0)):
            return MROPE_SECTION
    if c.model_type in ("gemma2", "gemma3_text", "qwen3"):
        kinds = set(getattr(c, "layer_types", None) or [])
        if "sliding_attention" in kinds and not getattr(c, "sliding_window", None):
            return GEMMA_NO_WINDOW
        if c.model_type == "gemma3_text" and not getattr(c, "sliding_window", None):
            return GEMMA3_NULL_WINDOW
        if c.model_type == "gemma2" and not getattr(c, "sliding_window", None):
            return GEMMA2_NULL_WINDOW
    if c.model_type == "gemma4_text" and c.num_kv_shared_layers and not c.hidden_size_per_layer_input:
        return GEMMA4_SHARED_NO_PLE
    if c.model_type == "falcon":
        if c.new_decoder_architecture and not c.parallel_attn:
            return FALCON_NEW_SEQUENTIAL
        if not c.new_decoder_architecture and c.parallel_attn and c.num_ln_in_parallel_attn == 2:
            return FALCON_OLD_PARALLEL_2LN
        if not c.new_decoder_architecture and not c.multi_query and c.num_kv_heads != c.num_attention_heads:
            return FALCON_OLD_MHA_KV
    if c.model_type == "gptj" and c.rotary_dim is not None and c.rotary_dim > c.n_embd // c.n_head:
        return GPTJ_ROTARY
    if c.model_type == "phi":
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        if int(head_dim * c.rope_parameters.get("partial_rotary_factor", 1.0)) % 2:
            return PHI_ODD_ROTARY
    return None


def exclusion_grid() -> list[Cfg]:
    """Tiny configs over the keys `forward_breaks` reads: every Falcon combination, GPT-J rotary_dim
    below, at and above head_dim, Phi rotary widths even and odd, Gemma 4 with and without kv-shared
    layers and per-layer inputs."""
    grid: list[Cfg] = []
    falcon = {"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
              "vocab_size": 100}  # fmt: skip
    for new, parallel, n_ln, mq, kv in itertools.product(
        (True, False), (True, False), (None, 1, 2), (True, False), (None, 2)
    ):
        grid.append(falcon | {"new_decoder_architecture": new, "parallel_attn": parallel,
                              "num_ln_in_parallel_attn": n_ln, "multi_query": mq, "num_kv_heads": kv})  # fmt: skip
    for head_dim, rotary_dim in itertools.product((8, 16, 32, 64), (4, 8, 16, 32, 64, 100)):
        grid.append({"model_type": "gptj", "n_embd": 2 * head_dim, "n_head": 2, "n_layer": 1,
                     "vocab_size": 100, "rotary_dim": rotary_dim})  # fmt: skip
    for shared, ple in itertools.product((0, 1), (0, 2)):
        grid.append({"model_type": "gemma4_text", "hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1,
                     "num_hidden_layers": 3, "vocab_size": 100, "intermediate_size": 16, "head_dim": 8,
                     "global_head_dim": 8, "layer_types": ["sliding_attention", "full_attention", "full_attention"],
                     "sliding_window": 4, "num_kv_shared_layers": shared, "hidden_size_per_layer_input": ple,
                     "vocab_size_per_layer_input": 100})  # fmt: skip
    for head_dim, factor in itertools.product((8, 10, 12, 16, 24, 40), (0.25, 0.4, 0.5, 1.0)):
        grid.append({"model_type": "phi", "hidden_size": 2 * head_dim, "num_attention_heads": 2,
                     "num_hidden_layers": 1, "vocab_size": 100, "intermediate_size": 32,
                     "partial_rotary_factor": factor})  # fmt: skip
    return grid


def check_exclusions() -> tuple[Counter[str | None], list[str]]:
    """Run every grid config (CPU, B=2, S=5): it must fail exactly when `forward_breaks` says so.

    Returns the grid configs per condition (None: runs) and the disagreements."""
    grid = exclusion_grid()
    per_reason: Counter[str | None] = Counter()
    wrong = []
    for cfg in grid:
        config = CONFIG_MAPPING[cfg["model_type"]].from_dict(dict(cfg))
        reason = forward_breaks(config)
        per_reason[reason] += 1
        try:
            model = build(config, "cpu")
            ids = torch.randint(0, config.vocab_size, (2, 5))
            model(input_ids=ids, labels=ids).loss.backward()
            error = None
        except Exception as exc:  # what transformers raises on these configs: any exception
            error = f"{type(exc).__name__}: {exc}"
        if (reason is None) != (error is None):
            wrong.append(f"EXCLUSION {cfg}: forward_breaks says {reason!r}, the forward {error or 'runs'}")
    return per_reason, wrong


# ------------------------------------------------------------------ one case
@dataclass
class Case:
    model_type: str
    label: str
    cfg: Cfg
    batch_size: int
    seq_len: int
    device: str = ""
    counted: int | None = None  # FlopCounterMode total
    predicted: int | None = None  # count_flops(...).total from the full dict
    predicted_dict: int | None = None  # ... from the dict as generated
    params_hf: int = 0
    params_tcalc: int = 0  # count_params from the full dict
    params_tcalc_dict: int = 0
    skipped: str | None = None
    error: str | None = None

    @property
    def flops_ok(self) -> bool:
        return self.counted is not None and self.counted == self.predicted == self.predicted_dict

    @property
    def params_ok(self) -> bool:
        return self.params_hf == self.params_tcalc == self.params_tcalc_dict

    @property
    def shape(self) -> str:
        """The model shape as tcalc reads it from the full dict."""
        m = ModelConfig.model_validate(from_hf_config(self.cfg))
        parts = [f"L={m.n_layers}", f"D={m.d_model}", f"A={m.n_heads}"]
        if m.n_kv_heads != m.n_heads:
            parts.append(f"kv={m.n_kv_heads}")
        if m.head_dim * m.n_heads != m.d_model:
            parts.append(f"h_d={m.head_dim}")
        parts += [f"F={m.d_ff}", f"V={m.vocab_size}"]
        if m.n_experts > 1 or m.router:
            parts.append(f"E={m.n_experts} k={m.experts_per_token}")
        if m.d_embedding != m.d_model:
            parts.append(f"d_emb={m.d_embedding}")
        return " ".join(parts)


def build(config: PretrainedConfig, device: str) -> torch.nn.Module:
    kw = {"experts_implementation": "eager"} if config.model_type in MOE_TYPES else {}
    auto = AutoModelForCausalLM
    if config.model_type in WRAPPERS:
        auto = AutoModelForSpeechSeq2Seq if config.model_type == "voxtral" else AutoModelForImageTextToText
    torch.manual_seed(0)  # MoE routing depends on the weights; the FLOP total does not
    with torch.device(device):
        return auto.from_config(config, attn_implementation="eager", **kw)


TOWER_MODULE = re.compile(r"(?:^|\.)(?:vision_tower|vision_model|visual|audio_tower|multi_modal_projector|mm_projector"
                          r"|embed_vision|embed_audio)\.")


def language_model_params(model: torch.nn.Module) -> int:
    """Parameters outside the towers (all of them for a text-only model)."""
    return sum(p.numel() for name, p in model.named_parameters() if not TOWER_MODULE.search(name))


def tcalc_model(cfg: Cfg) -> ModelConfig:
    return ModelConfig.model_validate(from_hf_config(cfg))


def run_case(case: Case) -> Case:
    """Count parameters (meta build), then FLOPs of one forward + backward (CPU or meta)."""
    config = CONFIG_MAPPING[case.model_type].from_dict(dict(case.cfg))
    full = json.loads(config.to_json_string(use_diff=False))
    as_written, case.cfg = case.cfg, full
    m, m_dict = tcalc_model(full), tcalc_model(as_written)
    case.params_tcalc, case.params_tcalc_dict = count_params(m).total, count_params(m_dict).total
    meta = build(config, "meta")
    case.params_hf = language_model_params(meta)
    whole = sum(p.numel() for p in meta.parameters())  # towers included: what the CPU would allocate
    case.seq_len = min(case.seq_len, m.max_seq_len)

    case.skipped = forward_breaks(config)
    if case.skipped:
        return case
    case.device = "cpu" if whole <= CPU_MAX_PARAMS else "meta"
    if case.device == "meta" and m.n_experts > 1:
        case.skipped = MOE_TOO_LARGE
        return case
    model = build(config, case.device)
    model.train()
    vocab = (config.get_text_config() if case.model_type in WRAPPERS else config).vocab_size
    with torch.device(case.device):
        ids = torch.randint(0, vocab, (case.batch_size, case.seq_len))
        mask = torch.ones_like(ids)  # given, as a data loader gives it; without one, transformers
        # scans position_ids for packed sequences (.item(), which the meta device cannot run)
    counter = FlopCounterMode(display=False)
    with counter:
        model(input_ids=ids, attention_mask=mask, labels=ids, use_cache=False).loss.backward()
    case.counted = counter.get_total_flops()
    w = Workload(seq_len=case.seq_len, batch_size=case.batch_size)
    if case.model_type in ALL_EXPERTS:  # HF's Llama 4 multiplies every expert; tcalc counts top-k
        m = m.with_overrides({"experts_per_token": m.n_experts})
        m_dict = m_dict.with_overrides({"experts_per_token": m_dict.n_experts})
    case.predicted, case.predicted_dict = count_flops(m, w).total, count_flops(m_dict, w).total
    return case


def draw_cases(n: int, seed: int, only: set[str] | None = None) -> list[Case]:
    """n runnable random configs per model_type (skipped draws kept, replaced), then EDGE."""
    rng = random.Random(seed)
    workload = random.Random(seed + 1)

    def new(model_type: str, label: str, cfg: Cfg) -> Case:
        B, S = workload.randint(1, MAX_BATCH), workload.randint(1, MAX_SEQ)
        return Case(model_type, label, cfg, B, S)

    out: list[Case] = []
    for model_type in (t for t in SUPPORTED_MODEL_TYPES
                       if t in GENERATORS and t not in HYBRID_TYPES and (only is None or t in only)):
        runnable = 0
        for draw in range(n * MAX_DRAWS):
            if runnable == n:
                break
            cfg = GENERATORS[model_type](rng)
            config = CONFIG_MAPPING[model_type].from_dict(dict(cfg))
            out.append(new(model_type, f"random-{draw}", cfg))
            runnable += forward_breaks(config) is None
    out += [new(cfg["model_type"], label, cfg) for label, cfg in EDGE
            if cfg["model_type"] not in HYBRID_TYPES and (only is None or cfg["model_type"] in only)]
    return out


# ------------------------------------------------------------------ report
def kind(case: Case) -> str:
    return "random" if case.label.startswith("random-") else "edge"


def summary(cases: list[Case]) -> tuple[list[str], list[str]]:
    """Markdown rows of the FLOPs table and of the parameter table, per model_type and total."""
    flops_rows, param_rows = [], []
    groups = [(t, [c for c in cases if c.model_type == t]) for t in SUPPORTED_MODEL_TYPES]
    for name, sub in [*groups, ("**all**", cases)]:
        ran = [c for c in sub if c.counted is not None]
        random_n = sum(kind(c) == "random" for c in ran)
        per_device = {d: sum(c.device == d for c in ran) for d in ("cpu", "meta")}
        devices = ", ".join(f"{d} {k}" for d, k in per_device.items() if k)
        bs = f"{min(c.batch_size for c in ran)}–{max(c.batch_size for c in ran)}" if ran else ""
        ss = f"{min(c.seq_len for c in ran)}–{max(c.seq_len for c in ran)}" if ran else ""
        equal = sum(c.flops_ok for c in ran)
        skipped = sum(c.skipped is not None for c in sub)
        errors = sum(c.error is not None for c in sub)
        flops_rows.append(
            f"| {name} | {len(ran)} | {random_n} | {len(ran) - random_n} | {devices} | {bs} | {ss} | "
            f"{equal} | {len(ran) - equal + errors} | {skipped} |"
        )
        checked = [c for c in sub if c.error is None]
        params_equal = sum(c.params_ok for c in checked)
        param_rows.append(
            f"| {name} | {len(checked)} | {params_equal} | {len(checked) - params_equal + errors} |"
        )
    return flops_rows, param_rows


FLOPS_HEADER = [
    "| model_type | cases | random | edge | device | B | S | FlopCounterMode = tcalc | mismatches | skipped |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
]
PARAMS_HEADER = [
    "| model_type | models | sum(numel) = count_params | mismatches |",
    "| --- | --- | --- | --- |",
]


def document(cases: list[Case], n: int, seed: int, grid: Counter[str | None]) -> str:
    """The FLOPs section of docs/validation.md, markers included."""
    flops_rows, param_rows = summary(cases)
    skipped = [c for c in cases if c.skipped]
    ran = [c for c in cases if c.counted is not None]
    out = [
        BEGIN,
        "<!-- Generated by tools/crosscheck/flops.py; do not edit by hand. Regenerate with:",
        f"     {REGENERATE} -->",
        "",
        "## FLOPs: tcalc flops vs torch FlopCounterMode",
        "",
        f"Generated by `tools/crosscheck/flops.py --n {n} --seed {seed}` (torch {torch.__version__}, "
        f"transformers {transformers.__version__}); CI runs it. Regenerate with:",
        "",
        "```bash",
        REGENERATE,
        "```",
        "",
        "**Measured:** `torch.utils.flop_counter.FlopCounterMode().get_total_flops()` over one",
        "training step of a small Hugging Face model: `AutoModelForCausalLM.from_config(config,",
        "attn_implementation=\"eager\")` (every MoE type also `experts_implementation=\"eager\"`) in training",
        "mode, a forward with labels on B sequences of S random tokens, then `loss.backward()`.",
        f"Configs: hf_params.py's generators ({n} runnable random configs per model_type, seed {seed})",
        "and its EDGE cases (GQA, MQA, head_dim ≠ D/A, tied and untied heads, QKV-only biases,",
        "parallel attention and residuals, MoE, OPT's embedding projections, post-LN, minimal configs",
        f"on the transformers defaults). Models of at most {CPU_MAX_PARAMS:,} parameters run on the CPU;",
        "the larger minimal ones run on the meta device (FlopCounterMode counts from shapes).",
        "",
        "**Predicted:** `count_flops(ModelConfig.model_validate(from_hf_config(cfg)),",
        "Workload(seq_len=S, batch_size=B)).total`, the default convention (`tcalc flops`: every matmul",
        "in full, attention scores S² per head, backward = 2 × forward), for the config dict as written",
        "and for the full dict transformers saves; both must equal the measured total exactly. The",
        "second table checks `count_params` against `sum(p.numel() for p in model.parameters())` of",
        "the same models (tools/crosscheck/hf_params.py checks parameters on more configs).",
        "",
        "**What FlopCounterMode does not count, hence eager:** CPU SDPA (`attn_implementation=\"sdpa\"`,",
        "the transformers default) counts no FLOPs for the attention core, and `grouped_mm` experts",
        "(Mixtral's default `experts_implementation`) count none for the experts; CUDA SDPA's backward",
        "is counted as 2.5 × its forward. Eager attention and eager experts run every matmul as",
        "mm/addmm/bmm, which is what the default convention counts.",
        "",
        "**Llama 4:** Hugging Face's `Llama4TextExperts` multiplies every token by every expert (the",
        "router's scores zero the others afterwards), so FlopCounterMode counts n_experts experts per",
        "token where the model needs top-k. tcalc counts the routed top-k; for this check only it is",
        "compared with `experts_per_token = n_experts`, which makes everything else exact too.",
        "Sliding-window and chunked layers (Mistral, Gemma 2/3, gpt-oss, Llama 4, Qwen3) run as eager",
        "attention runs them, a full S×S with a mask: the default convention counts exactly that.",
        "",
        *FLOPS_HEADER,
        *flops_rows,
        "",
        "### Parameters: count_params vs sum of numel (same models)",
        "",
        *PARAMS_HEADER,
        *param_rows,
        "",
        "### Skipped cases and why",
        "",
        "Every condition under which a case is skipped, and the cases of this run it hit. Only their",
        "FLOPs are skipped (their parameters are in the table above); a skipped random draw is",
        "replaced by the next one. The first five are configs transformers 5.23 builds but cannot run",
        f"a forward on; each run checks them on a grid of {grid.total()} tiny configs over the keys involved",
        "(Falcon: every combination of new_decoder_architecture, parallel_attn, num_ln_in_parallel_attn,",
        "multi_query and num_kv_heads), which fail exactly when `forward_breaks` names a condition.",
        "",
        "| model_type | condition | cases of this run | grid configs |",
        "| --- | --- | --- | --- |",
    ]
    for model_type, why in KNOWN_SKIPS:
        hit = [c.label for c in skipped if (c.model_type, c.skipped) == (model_type, why)]
        out.append(f"| {model_type} | {why} | {', '.join(hit) or 'none'} | {grid[why] or ''} |")
    out += [
        "",
        "<details><summary>Every case</summary>",
        "",
        "| model_type | case | shape | B | S | device | FlopCounterMode | tcalc |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    out += [
        f"| {c.model_type} | {c.label} | {c.shape} | {c.batch_size} | {c.seq_len} | {c.device} | "
        f"{c.counted:,} | {c.predicted:,} |"
        for c in ran
    ]
    out += ["", "</details>", END]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=8, help="runnable random configs per model_type")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write-docs", action="store_true", help="update the FLOPs section of docs/validation.md")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    ap.add_argument("--types", help="only these model_types (comma-separated; not with --write-docs)")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)  # tiny matmuls: threads only contend (2 cores, CI)

    start = time.perf_counter()
    cases = draw_cases(args.n, args.seed, set(args.types.split(",")) if args.types else None)
    failures: list[str] = []
    for case in cases:
        try:
            run_case(case)
        except Exception as exc:  # a generator bug or a tcalc refusal: both are failures here
            case.error = f"{type(exc).__name__}: {exc}"
            failures.append(f"ERROR {case.model_type}/{case.label}: {case.error} -- {case.cfg}")
            continue
        where = f"{case.model_type}/{case.label} B={case.batch_size} S={case.seq_len}"
        if not case.params_ok:
            failures.append(
                f"PARAMS {where}: transformers {case.params_hf:,} tcalc full {case.params_tcalc:,} "
                f"dict {case.params_tcalc_dict:,}"
            )
        if case.skipped:
            print(f"skipped {where}: {case.skipped}")
        elif not case.flops_ok:
            failures.append(
                f"FLOPS {where} ({case.device}): FlopCounterMode {case.counted:,} tcalc full "
                f"{case.predicted:,} dict {case.predicted_dict:,} -- {case.cfg}"
            )
        elif args.verbose:
            print(f"ok {where} ({case.device}): {case.counted:,}")
    grid, wrong = check_exclusions()
    failures += wrong
    seconds = time.perf_counter() - start

    flops_rows, param_rows = summary(cases)
    print("\nFLOPs: tcalc flops (default convention) vs FlopCounterMode")
    print("\n".join([*FLOPS_HEADER, *flops_rows]))
    print("\nParameters: count_params vs sum of numel")
    print("\n".join([*PARAMS_HEADER, *param_rows]))
    print(f"\nskip conditions: {grid.total()} grid configs, {len(wrong)} disagree with forward_breaks")
    print(f"{len(cases)} cases, {seconds:.1f} s (transformers {transformers.__version__}, torch {torch.__version__})")
    for line in failures:
        print(line)
    if args.write_docs:
        path = REPO / "docs" / "validation.md"
        from tools.docsection import write_section

        write_section(path, BEGIN, END, document(cases, args.n, args.seed, grid))
        print(f"wrote {path.relative_to(REPO)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
