"""How a result is shown: one module per command, and what they share (common): rich tables for
people, JSON/YAML/CSV for scripts."""
