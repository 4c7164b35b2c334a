"""No traceback, ever: random argument lists and file contents thrown at the CLI.

Every run must end with exit 0, 1 (only `check`: a check failed) or 2 (bad input); a non-zero exit
of any other command is exactly one `Error: ...` line on stderr with nothing on stdout; "Traceback"
and "internal error" never appear.
"""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transformer_calc.cli import run

COMMANDS = ["params", "memory", "flops", "mfu", "inference", "serve", "sweep", "presets", "hardware", "check"]
OPTIONS = [
    "--preset", "--config", "--hf-config", "--L", "--D", "--A", "--kv-heads", "--head-dim", "--E", "--d-ff",
    "--V", "--K", "--set", "--p", "--T", "--S", "--B", "--precision", "--grad-bytes", "--optimizer",
    "--recompute", "--flash", "--no-flash", "--dropout", "--activations", "--sp", "--P", "--dp", "--zero",
    "--gpu", "--max-memory", "--format", "-f", "--bogus", "--causal", "--tokens", "--gpus", "--mfu",
    "--budget", "--dtype", "--global-batch", "--step-time", "--tokens-per-s", "--new-tokens",
    "--weight-dtype", "--kv-dtype", "--cache-kv-heads", "--no-kv-cache", "--min-tokens-per-s",
    "--metrics", "--fits-only", "--sort", "--limit", "--x", "--y", "--series",
    "--finetune", "--lora-rank", "--lora-alpha", "--lora-targets", "--train-head", "--train-embeddings",
    "--offload", "--offload-device",
    "--prompt-len", "--output-len", "--ttft", "--tpot", "--request-rate", "--ep", "--memory-utilization",
    "--block-size", "--max-num-batched-tokens", "--max-num-seqs", "--cuda-context", "--activation-peak",
    "--engine-workspace", "--no-cuda-graphs", "--matmul-efficiency", "--memory-efficiency", "--kernel-launch-s",
    "--draft", "--mtp", "--speculative-tokens", "--acceptance-rate", "--sequence-overhead-s",
    "--metrics", "--fits-only", "--sort", "--limit", "--x", "--y", "--series", "--ep", "--cp", "--etp",
    "--mla-cache", "--framework", "--no-head", "--micro-batches", "--kv-cache",
]
WORDS = [
    "gpt2", "gpt3", "llama-2-7b", "mixtral-8x7b", "falcon-40b", "a100-80gb", "h100", "json", "yaml", "csv",
    "table", "seed", "selective", "full", "mixed", "fp32", "bf16", "adamw", "lion", "70GiB", "80GB",
    "mlp=swiglu", "tied_embeddings=false", "1,2,4..64", "1..8:2", "memory,fits", "kv_cache,bound", "-memory", "peak_bytes,fits", "kv_cache_bytes,decode_bound",
    "-peak_bytes", "hardware_flops,tokens_per_s", "n_layer=3", "n_kv_heads=3", "=", "", " ", "-1", "0", "1", "2",
    "3", "7", "8", "64", "1e3", "2.5", "nan", "inf", "10000000", "1000000", "-0", "0x10", "é", "\x00",
    "lora", "qlora", "dora", "all-linear", "q,v", "gate", "q,,zz", "optimizer", "optimizer+params", "nvme", "cpu",
    "q4_k_m", "mxfp4", "gptq-int4", "nvfp4", "gpt-oss-20b", "0.05", "0.9", "1GiB",
]
VALUES = st.one_of(
    st.sampled_from(WORDS),
    st.integers(-(10**12), 10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(string.printable, max_size=12),
)
FILE_TEXTS = st.one_of(
    st.sampled_from(
        [
            "", "\x00\x01\x02", "model: {preset: gpt2}\n", "model: {preset: gpt2}\ntraining: {S: 1024, T: 4}\n",
            "model: 3\n", "- 1\n", "L: [1, 2\n", "!!python/object/apply:os.system ['true']\n",
            "model: {preset: nope}\n", "model: {L: 2, D: 8, A: 2, V: 10}\ntraining: {zero: 3, dp: 4}\n",
            '{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}',
            '{"model_type": "bert"}', '{"model_type": "gpt2", "n_embd": "big"}', "{", "[]", "null",
            "model: {preset: gpt3}\ntraining: {S: 10000000, B: 1000000, P: 96}\n",
            "model: {L: 1000000, D: 65536, A: 512, V: 10000000, K: 10000000}\n",
            "model: {preset: llama-2-7b}\ninference: {B: 8, S: 4096, new_tokens: 100000, T: 2}\n",
            "model: {preset: llama-2-7b}\ninference: {B: x}\nchecks: {min_tokens_per_s: -1}\n",
            "model: {preset: gpt2}\ntraining: {finetune: qlora, lora_targets: [q, 3], lora_rank: true}\n",
            "model: {preset: gpt2}\ntraining: {finetune: dora, lora_alpha: .inf, offload: optimizer, zero: 2, dp: 2}\n",
            "model: {preset: llama-2-7b}\ninference: {S: 512, new_tokens: 64, ttft_s: 1, tpot_s: x, gpus: 4}\n",
            "model: {preset: llama-2-7b}\ninference: {S: 512, B: 4, memory_utilization: 2}\nchecks: {max_tpot_s: 0}\n",
        ]
    ),
    st.text(max_size=80),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    command=st.sampled_from(COMMANDS + ["nonsense"]),
    args=st.lists(st.one_of(st.sampled_from(OPTIONS), VALUES), max_size=8),
    text=FILE_TEXTS,
    suffix=st.sampled_from([".yaml", ".json"]),
)
def test_cli_never_shows_a_traceback(tmp_path_factory, capsys, command, args, text, suffix):
    path = tmp_path_factory.mktemp("fuzz") / f"input{suffix}"
    path.write_text(text, errors="surrogatepass") if "\x00" not in text else path.write_bytes(text.encode())
    argv = [command] + [str(path) if a in ("FILE",) else a for a in args]
    if args and args[-1] in ("--config", "--hf-config") or command == "check":
        argv.append(str(path))
    code = run(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert "internal error" not in err, err
    allowed = {0, 1, 2} if command == "check" else {0, 2}
    assert code in allowed, (argv, code, err)
    if code == 2 and command != "check":
        assert out == "", (argv, out)
        assert err.startswith("Error: ") and err.count("\n") == 1, (argv, err)
