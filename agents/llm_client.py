"""One chat completion through litellm, with timeouts, retries on transient errors and the call's cost.

litellm is imported lazily and told to use its bundled cost map, so importing this module (or litellm)
never touches the network.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from .prompts import Turn


@dataclass(frozen=True)
class LLMConfig:
    """How to reach a model: a litellm model string, optionally a self-hosted OpenAI-compatible base URL."""

    model: str
    api_base: str | None = None
    api_key: str | None = None  # usually None: litellm reads the provider's usual environment variable
    temperature: float | None = None
    max_output_tokens: int = 16384
    timeout_s: float = 600.0
    max_retries: int = 4
    backoff_s: float = 2.0
    backoff_max_s: float = 60.0


@dataclass(frozen=True)
class Reply:
    text: str
    tokens_in: int
    tokens_out: int
    cost_usd: float | None  # None when the model is not in litellm's cost map
    attempts: int  # requests made, retries included


class ProviderError(RuntimeError):
    """The provider failed after every retry (or with an error a retry cannot fix)."""

    def __init__(self, message: str, attempts: int):
        super().__init__(message)
        self.attempts = attempts


class ChatClient(Protocol):
    def complete(self, turns: Sequence[Turn], *, max_output_tokens: int | None = None) -> Reply: ...


def import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class LiteLLMClient:
    """A ChatClient over litellm.completion."""

    def __init__(self, config: LLMConfig, *, sleep: Callable[[float], None] = time.sleep):
        self.config = config
        self._sleep = sleep

    def _transient(self, litellm: Any) -> tuple[type[BaseException], ...]:
        return (
            litellm.RateLimitError,
            litellm.Timeout,
            litellm.APIConnectionError,
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
        )

    def _cost(self, litellm: Any, response: Any) -> float | None:
        hidden = getattr(response, "_hidden_params", {}) or {}
        if hidden.get("response_cost") is not None:
            return float(hidden["response_cost"])
        try:
            return float(litellm.completion_cost(completion_response=response))
        except litellm.exceptions.ModelNotMappedError:
            return None

    def complete(self, turns: Sequence[Turn], *, max_output_tokens: int | None = None) -> Reply:
        litellm = import_litellm()
        c = self.config
        kwargs: dict[str, Any] = {
            "model": c.model,
            "messages": [{"role": t.role, "content": t.content} for t in turns],
            "timeout": c.timeout_s,
            "max_tokens": max_output_tokens or c.max_output_tokens,
            "num_retries": 0,
            "max_retries": 0,  # we retry ourselves, with backoff we can see and test
        }
        if c.api_base:
            kwargs["api_base"] = c.api_base
        if c.api_key:
            kwargs["api_key"] = c.api_key
        if c.temperature is not None:
            kwargs["temperature"] = c.temperature
        transient = self._transient(litellm)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = litellm.completion(**kwargs)
                break
            except transient as e:
                if attempt > c.max_retries:
                    raise ProviderError(f"{type(e).__name__} after {attempt} requests: {e}", attempt) from e
                wait = min(c.backoff_max_s, c.backoff_s * 2 ** (attempt - 1))
                hinted = _retry_after(e)
                self._sleep(max(wait, hinted) if hinted is not None else wait)
            except litellm.exceptions.APIError as e:
                raise ProviderError(f"{type(e).__name__}: {e}", attempt) from e
        usage = getattr(response, "usage", None)
        text = response.choices[0].message.content or ""
        return Reply(
            text=text,
            tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
            tokens_out=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=self._cost(litellm, response),
            attempts=attempt,
        )
