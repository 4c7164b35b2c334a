"""Inference: the roofline (KV cache, memory, prefill/decode), expected latency, quantized
formats, serving capacity, speculative decoding."""
