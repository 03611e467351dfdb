"""Lazy package exports: a public name's module is imported when the name is first read.

``import deermem`` (and ``deermem.model``, ``deermem.policy``) must stay cheap:
a command that only checks a policy name or loads an evaluation protocol
should not pay for the selector, the dataclasses or the LLM stack. Each package
lists its public names with the module that defines them and installs the
module-level ``__getattr__``/``__dir__`` pair made here (PEP 562); a name read
once is stored in the package's namespace, so later reads are plain lookups.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, namespace: MutableMapping[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package that exports ``exports`` lazily.

    Args:
        package: the package's name, for the error message.
        namespace: the package's ``globals()``; it must define ``__all__``.
        exports: public name → the module that defines it.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace["__all__"]))

    return __getattr__, __dir__
