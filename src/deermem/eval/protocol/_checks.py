"""Strict reading of protocol files: every error names the file and the key.

The protocol files are small and their schema is fixed, so plain checks do
the job of a validation library here, with messages that name the dotted key.
The rules are those of the original harness's strict, frozen, extra-forbid
models: no unknown keys, no missing keys, no type coercion (``True`` is not a
number, ``"7"`` is not an int, an int is a valid float).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Final

from deermem.eval.errors import ProtocolError

__all__ = ["HEX_40", "HEX_64", "Section", "describe"]

HEX_40: Final = re.compile(r"[0-9a-f]{40}")
HEX_64: Final = re.compile(r"[0-9a-f]{64}")


def describe(value: object, limit: int = 60) -> str:
    """A short, type-revealing rendering of a rejected value."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Section:
    """One mapping of a protocol file, read key by key.

    Construction checks the keys (unknown and missing ones are reported
    together); the typed getters check the values. Each error is a
    :class:`ProtocolError` carrying the file and the dotted key.
    """

    __slots__ = ("_data", "_file", "_prefix")

    def __init__(
        self,
        data: object,
        *,
        file: str,
        key: str | None,
        fields: Iterable[str],
    ) -> None:
        self._file = file
        self._prefix = key
        if not isinstance(data, Mapping):
            raise ProtocolError(file, key, f"must be a mapping, got {describe(data)}")
        allowed = tuple(fields)
        unknown = sorted(str(name) for name in data if name not in allowed)
        missing = [name for name in allowed if name not in data]
        problems = []
        if unknown:
            problems.append(f"unknown key(s) {', '.join(map(repr, unknown))}")
        if missing:
            problems.append(f"missing key(s) {', '.join(map(repr, missing))}")
        if problems:
            problems.append(f"expected exactly: {', '.join(allowed)}")
            raise ProtocolError(file, key, "; ".join(problems))
        self._data: Mapping[str, object] = data

    @property
    def file(self) -> str:
        return self._file

    def path(self, name: str) -> str:
        """The dotted key of ``name`` inside this section."""
        return f"{self._prefix}.{name}" if self._prefix else name

    def error(self, name: str, problem: str) -> ProtocolError:
        return ProtocolError(self._file, self.path(name), problem)

    def raw(self, name: str) -> object:
        return self._data[name]

    def section(self, name: str, fields: Iterable[str]) -> Section:
        return Section(self._data[name], file=self._file, key=self.path(name), fields=fields)

    def integer(self, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
        value = self._data[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(name, f"must be a whole number, got {describe(value)}")
        self._check_range(name, value, minimum, maximum)
        return value

    def number(
        self,
        name: str,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        exclusive: bool = False,
    ) -> float:
        """A float (an int is accepted and converted, as a strict float field does)."""
        value = self._data[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(name, f"must be a number, got {describe(value)}")
        number = float(value)
        if not math.isfinite(number):
            raise self.error(name, f"must be finite, got {describe(value)}")
        if exclusive:
            if minimum is None or maximum is None:
                raise TypeError("an exclusive range needs both bounds")
            if not minimum < number < maximum:
                raise self.error(
                    name, f"must be strictly between {minimum} and {maximum}, got {value!r}"
                )
        else:
            self._check_range(name, number, minimum, maximum)
        return number

    def boolean(self, name: str) -> bool:
        value = self._data[name]
        if not isinstance(value, bool):
            raise self.error(name, f"must be true or false, got {describe(value)}")
        return value

    def text(
        self,
        name: str,
        *,
        pattern: re.Pattern[str] | None = None,
        meaning: str = "",
        allow_empty: bool = False,
    ) -> str:
        value = self._data[name]
        if not isinstance(value, str):
            raise self.error(name, f"must be a string, got {describe(value)}")
        if not value and not allow_empty:
            raise self.error(name, "must not be empty")
        if pattern is not None and not pattern.fullmatch(value):
            raise self.error(name, f"must be {meaning or pattern.pattern}, got {describe(value)}")
        return value

    def literal(self, name: str, expected: object) -> None:
        """Require one exact value (and type: ``1.0`` is not the literal ``1``)."""
        value = self._data[name]
        if type(value) is not type(expected) or value != expected:
            raise self.error(name, f"must be {expected!r}, got {describe(value)}")

    def text_list(
        self, name: str, *, unique: bool = True, non_empty: bool = True
    ) -> tuple[str, ...]:
        items = self._list(name)
        for position, item in enumerate(items):
            if not isinstance(item, str) or not item:
                raise ProtocolError(
                    self._file,
                    f"{self.path(name)}[{position}]",
                    f"must be a non-empty string, got {describe(item)}",
                )
        return self._distinct(name, tuple(items), unique, non_empty)  # type: ignore[return-value]

    def integer_list(
        self, name: str, *, minimum: int, maximum: int, unique: bool, non_empty: bool = True
    ) -> tuple[int, ...]:
        items = self._list(name)
        for position, item in enumerate(items):
            if (
                isinstance(item, bool)
                or not isinstance(item, int)
                or not minimum <= item <= maximum
            ):
                raise ProtocolError(
                    self._file,
                    f"{self.path(name)}[{position}]",
                    f"must be a whole number from {minimum} to {maximum}, got {describe(item)}",
                )
        return self._distinct(name, tuple(items), unique, non_empty)  # type: ignore[return-value]

    def _list(self, name: str) -> list[object]:
        value = self._data[name]
        if not isinstance(value, list):
            raise self.error(name, f"must be a list, got {describe(value)}")
        return value

    def _distinct(
        self, name: str, items: tuple[object, ...], unique: bool, non_empty: bool
    ) -> tuple[object, ...]:
        if non_empty and not items:
            raise self.error(name, "must not be empty")
        if unique:
            seen: set[object] = set()
            repeated: list[object] = []
            for item in items:
                if item in seen:
                    repeated.append(item)
                seen.add(item)
            if repeated:
                raise self.error(name, f"must not repeat values; repeated: {describe(repeated)}")
        return items

    def _check_range(
        self, name: str, value: float, minimum: float | None, maximum: float | None
    ) -> None:
        if minimum is not None and value < minimum:
            bound = f"from {minimum} to {maximum}" if maximum is not None else f"at least {minimum}"
            raise self.error(name, f"must be {bound}, got {value!r}")
        if maximum is not None and value > maximum:
            bound = f"from {minimum} to {maximum}" if minimum is not None else f"at most {maximum}"
            raise self.error(name, f"must be {bound}, got {value!r}")
