"""Kernel families found inside any reference: capture it as an aten FX graph, find each family's regions,
check them on random inputs, replace them with the family's custom op, leave the rest to Inductor.

Modules: ``capture`` (reference -> FX graph), ``region`` (a region, its extraction and check), ``families/``
(one package per family: ``match``, ``op``, ``kernel``), ``rewrite`` (the graph surgery), ``runtime`` (what a
candidate runs: per input signature capture, rewrite, compile, replay as one CUDA graph). These need torch
only and are shipped inside the candidates; ``solution`` (agent side) finds the families in a problem and
renders the candidate.
"""
