"""Old public import paths that still work, with a DeprecationWarning naming the new one (docs/cli.md)."""
from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable, Mapping


def moved(old_module: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` (PEP 562) for `old_module`: each of `names` (name → new home module) is
    looked up in its new home, with a DeprecationWarning that says where to import it from now."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        warnings.warn(f"{old_module}.{name} moved: import it from {names[name]}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(names[name]), name)

    return __getattr__
