"""Training: memory (states, activations), the phase timeline, fine-tuning, optimizers, FP8, step time."""
