"""The judge: SOL-ExecBench formats, inputs, correctness, timing, anti-cheat and speed-of-light.

Depends on torch, pydantic and the standard library only (triton / cutlass-dsl for those languages).
"""
