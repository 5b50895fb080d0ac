"""Turn a definition's reference source into callables (trusted problem code, never candidate code)."""

from __future__ import annotations

import hashlib
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable

from .errors import ReferenceFailure
from .models import Definition


@dataclass(frozen=True)
class Reference:
    run: Callable[..., Any]
    custom_inputs: Callable[[dict, Any], dict] | None
    module: types.ModuleType


def load_reference(definition: Definition) -> Reference:
    digest = hashlib.sha256(f"{definition.name}\0{definition.reference}".encode()).hexdigest()[:16]
    module = types.ModuleType(f"solforge_reference_{digest}")
    module.__file__ = f"<reference of {definition.name}>"
    # torch.compile (Dynamo, torch 2.11) re-imports a function's module by name to read its globals; a
    # module missing from sys.modules made every compiled baseline of the reference fail there.
    sys.modules[module.__name__] = module
    try:
        code = compile(definition.reference, module.__file__, "exec")
        exec(code, module.__dict__)  # noqa: S102 - the reference is the problem's own source
    except Exception as e:
        raise ReferenceFailure(f"reference of {definition.name} failed to load: {type(e).__name__}: {e}") from e
    custom = None
    if definition.custom_inputs_entrypoint:
        custom = module.__dict__[definition.custom_inputs_entrypoint]
    return Reference(run=module.__dict__["run"], custom_inputs=custom, module=module)
