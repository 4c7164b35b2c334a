"""tcalc: analytic cost calculator for decoder-only transformers."""

__version__ = "0.1.0"
