"""Hugging Face config.json import for the dense 2024-2026 families: qwen3, gemma2, gemma3_text, phi3, olmo2, granite, cohere, starcoder2.

Same contract as `transformer_calc.hf` (whose reader these builders use): the spec's parameter
count equals what transformers 5.23 builds on the meta device (tools/crosscheck/hf_params.py).
"""

from __future__ import annotations

from typing import Any

FAMILIES: dict[str, Any] = {}
