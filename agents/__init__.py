"""Candidate generators (LLM workers, offline generators) and planners."""
