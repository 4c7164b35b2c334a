"""Pure estimators: small functions from configs to exact ints (counts, bytes, FLOPs) and floats
(seconds, ratios). No typer, rich, yaml or printing; cite the formula's source at the code."""
