"""Hugging Face config.json import for the MoE and MLA families: qwen2_moe, qwen3_moe, deepseek_v3, glm4_moe, gpt_oss, llama4_text.

Same contract as `transformer_calc.hf` (whose reader these builders use): the spec's parameter
count equals what transformers 5.23 builds on the meta device (tools/crosscheck/hf_params.py).
"""

from __future__ import annotations

from typing import Any

FAMILIES: dict[str, Any] = {}
