"""Which agent a run uses, as plain data that travels to Dask workers; ``build`` makes the agent there.

Kinds: 'reference' (built in: proposes the problem's reference), the registry's kinds ('offline', 'llm'),
or 'module:function', a factory called with the same keyword arguments as the registry.
"""

from __future__ import annotations

import importlib

from pydantic import BaseModel, ConfigDict, Field

from agents.base import Agent


class AgentSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str = Field(default="offline", description="'offline', 'llm', 'reference' or 'module:function'.")
    language: str | None = Field(default=None, description="Language the agent writes, e.g. 'cuda_cpp'.")
    model: str | None = Field(default=None, description="litellm model name for 'llm'.")
    api_base: str | None = Field(default=None, description="OpenAI-compatible endpoint for 'llm'.")
    budget_usd: float | None = Field(default=None, description="Money the agent may spend.")
    kin: dict[str, dict[str, float | None]] = Field(
        default_factory=dict,
        description="Latencies earlier runs measured of template variants on other problems of a similar size "
        "(problem -> variant key -> ms, None where it failed), for the offline agent's transfer of winners.",
    )

    def build(self, device: str) -> Agent:
        if self.kind == "reference":
            from .reference_agent import ReferenceAgent

            return ReferenceAgent()
        budget = None
        try:
            from agents.budget import AgentBudget

            budget = AgentBudget(max_usd=self.budget_usd)
        except ImportError:
            pass
        kwargs = dict(language=self.language, model=self.model, api_base=self.api_base, device=device, budget=budget)
        if ":" in self.kind:
            module, func = self.kind.split(":", 1)
            return getattr(importlib.import_module(module), func)(**kwargs)
        from agents.registry import make_agent

        return make_agent(self.kind, **kwargs, kin=self.kin)
