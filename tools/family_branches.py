"""Count the estimators' branches on a model family (issue 35: "no estimator outside a block's own
module branches on a model family").

A *family branch* is an `if` / `elif` statement or a conditional expression (`a if t else b`) whose
test reads a family marker: a ModelConfig field or predicate that is true for one architecture family
(or a handful) and names its blocks, rather than a shape every decoder has. Counted in
transformer_calc/estimators/**, outside the block modules (each family's own module may branch on
itself): estimators/deepseek_v4.py, estimators/mla.py, estimators/gemma_layers.py, estimators/shared_block.py,
estimators/kind_attention.py, estimators/mixers/, training/gemma4.py, training/gemma4_layers.py, training/kind_attention.py,
training/latent_moe.py, training/attention_blocks.py,
inference/deepseek_v4.py, inference/gemma_layers.py, inference/kind_attention.py, inference/dsa.py, inference/shared_block.py,
training/hybrid_layers.py (mixers placed among, beside or instead of attention layers).

Family markers (attributes of a ModelConfig, and the predicates below):
  deepseek_v4                       DeepSeek-V4's blocks (hyper-connections, compressed attention)
  is_mla, kv_lora_rank, q_lora_rank DeepSeek-V2/V3 multi-head latent attention
  is_dsa, index_topk                DeepSeek-V3.2's sparse attention (its indexer)
  is_hybrid, one_mixer_per_layer, mixer_beside_attention
                                    attention beside / instead of a sequence mixer (Qwen3-Next, Falcon-H1, LFM2)
  shared_block_layer_ids, shared_blocks, n_shared_block_applications
                                    Zamba2's shared attention+MLP blocks
  sliding_kv_heads, per_kind_attention, shaped_by_kind()
                                    MiMo-V2-Flash's attention shaped by layer kind
  irregular_layers, is_gemma4(), per_layer_input_dim, per_layer_vocab_size, kv_shared_layers,
  full_head_dim, full_kv_heads, full_k_eq_v, altup_inputs, laurel_rank
                                    Gemma 3n / Gemma 4's layer classes, per-layer inputs, shared KV
  moe_latent_dim                    Nemotron's LatentMoE
Generic shape fields are not markers: the widths and counts (d_model, n_heads, n_kv_heads, head_dim,
d_ff, n_experts / is_moe, experts_per_token, shared_expert_d_ff, vocab_size), the MLP, norm and
positional kinds, biases, attention_pattern and sliding_window (every sliding-window model),
attention_sinks, qk_norm, tied_embeddings, mtp_layers, towers: a branch on them prices a shape.

Usage: python tools/family_branches.py          (the count per file, then the total)
tests/test_family_branches.py holds the total as a ratchet.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ESTIMATORS = ROOT / "transformer_calc" / "estimators"

MARKER_ATTRS = frozenset({
    "deepseek_v4", "is_mla", "kv_lora_rank", "q_lora_rank", "is_dsa", "index_topk",
    "is_hybrid", "one_mixer_per_layer", "mixer_beside_attention",
    "shared_block_layer_ids", "shared_blocks", "n_shared_block_applications",
    "sliding_kv_heads", "per_kind_attention",
    "irregular_layers", "per_layer_input_dim", "per_layer_vocab_size", "kv_shared_layers",
    "full_head_dim", "full_kv_heads", "full_k_eq_v", "altup_inputs", "laurel_rank",
    "moe_latent_dim",
})
MARKER_CALLS = frozenset({"is_gemma4", "shaped_by_kind"})

BLOCK_MODULES = frozenset({
    "deepseek_v4.py", "shared_block.py", "mla.py", "gemma_layers.py", "kind_attention.py",
    "training/gemma4.py", "training/gemma4_layers.py", "training/kind_attention.py",
    "training/latent_moe.py", "training/attention_blocks.py",
    "inference/deepseek_v4.py",
    "inference/gemma_layers.py", "inference/kind_attention.py", "inference/dsa.py", "inference/shared_block.py",
    "training/hybrid_layers.py",
})
BLOCK_FOLDERS = ("mixers/",)


def reads_marker(test: ast.expr) -> bool:
    """Whether an if's test reads a family marker (an attribute, or a call of a marker predicate)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Attribute) and node.attr in MARKER_ATTRS:
            return True
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in MARKER_CALLS:
                return True
    return False


def branches_in(source: str) -> list[int]:
    """The line numbers of the family branches in one module's source (if, elif, conditional expression)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.If, ast.IfExp)) and reads_marker(node.test):
            lines.append(node.lineno)
    return sorted(lines)


def counted(rel: str) -> bool:
    """Whether a module (path relative to estimators/) is counted: not a block's own module."""
    return rel not in BLOCK_MODULES and not rel.startswith(BLOCK_FOLDERS)


def count() -> dict[str, list[int]]:
    """{path relative to estimators/: branch lines}, for every counted module with at least one."""
    out = {}
    for path in sorted(ESTIMATORS.rglob("*.py")):
        rel = path.relative_to(ESTIMATORS).as_posix()
        if counted(rel) and (lines := branches_in(path.read_text())):
            out[rel] = lines
    return out


def main() -> int:
    found = count()
    for rel, lines in sorted(found.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"{len(lines):4d}  estimators/{rel}  (lines {', '.join(map(str, lines))})")
    print(f"{sum(map(len, found.values())):4d}  total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
