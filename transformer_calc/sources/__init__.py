"""Where a model comes from: user files (files), presets and job files (presets), Hugging Face
config.json (hf, hf_2024), checkpoints' headers (safetensors, gguf), the Hub (hub), and the one
resolver of a model argument (resolve). Reads input; never estimates."""
