"""How a result is shown: rich tables for people, JSON/YAML/CSV for scripts (tables)."""
