"""The agent kinds solforge can run, with capability flags, and one factory for all of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from .base import Agent
from .budget import AgentBudget, BudgetMeter
from .prompts import available_languages


@dataclass(frozen=True)
class AgentOptions:
    language: str | None
    model: str | None
    api_base: str | None
    device: str
    budget: AgentBudget
    kin: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)  # offline: ``offline/transfer.py``


@dataclass(frozen=True)
class AgentKind:
    name: str
    languages: frozenset[str]
    needs_network: bool
    needs_gpu: bool  # to produce its best candidates (it still works on the CPU where noted)
    needs_model: bool
    factory: Callable[[AgentOptions], Agent]
    description: str


def _offline(o: AgentOptions) -> Agent:
    from .offline.agent import OfflineAgent

    return OfflineAgent(language=o.language, kin=o.kin)


def _llm(o: AgentOptions) -> Agent:
    from .llm import LLMAgent
    from .llm_client import LLMConfig

    assert o.model is not None and o.language is not None
    return LLMAgent(LLMConfig(model=o.model, api_base=o.api_base), language=o.language, meter=BudgetMeter(o.budget))


REGISTRY: dict[str, AgentKind] = {
    k.name: k
    for k in (
        AgentKind(
            "offline", frozenset({"pytorch", "triton", "cuda_cpp", "cute_dsl"}), needs_network=False, needs_gpu=False,
            needs_model=False, factory=_offline,
            description="templates matched to the reference's ops + torch.compile variants; pytorch-only on CPU",
        ),
        AgentKind(
            "llm", frozenset(available_languages()), needs_network=True, needs_gpu=False, needs_model=True,
            factory=_llm, description="an LLM through litellm following agents/protocol.md",
        ),
    )
}  # fmt: skip


def make_agent(
    kind: str,
    *,
    language: str | None = None,
    model: str | None = None,
    api_base: str | None = None,
    device: str = "cpu",
    budget: AgentBudget | None = None,
    kin: Mapping[str, Mapping[str, float | None]] | None = None,
) -> Agent:
    """An agent of a registered kind; raises ValueError naming what is wrong with the request."""
    spec = REGISTRY.get(kind)
    if spec is None:
        raise ValueError(f"unknown agent kind {kind!r} (known: {', '.join(sorted(REGISTRY))})")
    if language is not None and language not in spec.languages:
        raise ValueError(f"agent {kind!r} does not write {language!r} (it writes: {', '.join(sorted(spec.languages))})")
    if spec.needs_model and not model:
        raise ValueError(f"agent {kind!r} needs a model (a litellm model string, e.g. 'openai/gpt-4o')")
    if spec.needs_model and language is None:
        raise ValueError(f"agent {kind!r} needs a language (one of: {', '.join(sorted(spec.languages))})")
    opts = AgentOptions(language, model, api_base, device, budget or AgentBudget(), dict(kin or {}))
    return spec.factory(opts)
