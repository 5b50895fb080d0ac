"""Offline candidate generators: no network, no model; real candidates from templates and torch.compile."""
