"""Accelerators: the sourced hardware table's types, peaks per dtype, λ_math, interconnects."""
