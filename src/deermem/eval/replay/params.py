"""The replay's workload parameters: a documented YAML file, validated once.

The bundled file (``params.yaml`` beside this module) is the default;
``deermem eval replay --params FILE`` reads another with the same schema.
Every key is required and every value checked — a range must be ``[low,
high]`` with ``low ≤ high``, shares must sum to 1 — so a typo stops the run
with an error naming the file, the key and the value, before any traffic is
generated. The file's SHA-256 goes into the results.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from deermem.eval.errors import ProtocolError

__all__ = [
    "BUNDLED_PARAMS",
    "Bootstrap",
    "Bursts",
    "CategorySpec",
    "Corrections",
    "LoadedParams",
    "ReplayParams",
    "Signals",
    "load_params",
]

BUNDLED_PARAMS: Final = "params.yaml"

Share = Annotated[float, Field(ge=0.0, le=1.0)]
Days = Annotated[float, Field(ge=0.0, le=3650.0)]


def _ordered(pair: tuple[float, float]) -> tuple[float, float]:
    if pair[0] > pair[1]:
        raise ValueError("a range is [low, high] with low <= high")
    return pair


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class CategorySpec(_Strict):
    """One kind of fact (see ``params.yaml`` for each key)."""

    share: Share
    confidence: tuple[Share, Share]
    need_probability: Share
    needs: tuple[Annotated[int, Field(ge=1, le=100)], Annotated[int, Field(ge=1, le=100)]]
    need_delay_days: tuple[Days, Days]

    _ranges = field_validator("confidence", "needs", "need_delay_days")(_ordered)


class Signals(_Strict):
    """What comes with a need, and the noise (chances per need or per session)."""

    search_on_need: Share
    confirm_on_need: Share
    restate_on_need: Share
    restore_on_miss: Share
    false_search: Share
    false_confirmation: Share


class Corrections(_Strict):
    """Facts the user corrects later."""

    probability: Share
    delay_days: tuple[Days, Days]

    _ranges = field_validator("delay_days")(_ordered)


class Bursts(_Strict):
    """Sessions that state many facts at once, none needed again."""

    probability: Share
    size: tuple[Annotated[int, Field(ge=1, le=1000)], Annotated[int, Field(ge=1, le=1000)]]
    confidence: tuple[Share, Share]

    _ranges = field_validator("size", "confidence")(_ordered)


class Bootstrap(_Strict):
    """The paired bootstrap over seeds."""

    iterations: Annotated[int, Field(ge=100, le=1_000_000)]
    confidence: Annotated[float, Field(gt=0.5, lt=1.0)]
    seed: int


class Quick(_Strict):
    """What ``--quick`` replaces."""

    seeds: Annotated[int, Field(ge=1, le=1000)]
    users: Annotated[int, Field(ge=1, le=100)]
    days: Annotated[int, Field(ge=1, le=3650)]


class ReplayParams(_Strict):
    """Everything the replay's workload and comparison depend on (see ``params.yaml``)."""

    version: Literal[1]
    seeds: Annotated[int, Field(ge=1, le=1000)]
    users: Annotated[int, Field(ge=1, le=100)]
    days: Annotated[int, Field(ge=1, le=3650)]
    sessions_per_week: Annotated[float, Field(gt=0.0, le=100.0)]
    facts_per_session: tuple[
        Annotated[int, Field(ge=0, le=100)], Annotated[int, Field(ge=0, le=100)]
    ]
    categories: dict[str, CategorySpec] = Field(min_length=1)
    signals: Signals
    corrections: Corrections
    bursts: Bursts
    caps: tuple[Annotated[int, Field(ge=10, le=500)], ...] = Field(min_length=1)
    search_top_k: Annotated[int, Field(ge=1, le=50)]
    bootstrap: Bootstrap
    quick: Quick

    _ranges = field_validator("facts_per_session")(_ordered)

    @model_validator(mode="after")
    def _consistent(self) -> ReplayParams:
        total = sum(spec.share for spec in self.categories.values())
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"the categories' shares must sum to 1, got {total!r}")
        if len(set(self.caps)) != len(self.caps):
            raise ValueError(f"each cap once, got {list(self.caps)}")
        return self

    def quickened(self) -> ReplayParams:
        """These parameters with ``quick``'s seeds, users and days."""
        return self.model_copy(update=self.quick.model_dump())

    def to_dict(self) -> dict[str, Any]:
        """The parameters as JSON-ready data (ranges as lists), as the results record them."""
        return self.model_dump(mode="json")


@dataclass(frozen=True, slots=True)
class LoadedParams:
    """Parameters and where they came from.

    Attributes:
        params: the validated parameters.
        source: the file as given, or ``"bundled"``.
        sha256: the SHA-256 of the file's bytes.
    """

    params: ReplayParams
    source: str
    sha256: str


def load_params(path: Path | None = None) -> LoadedParams:
    """Read and validate a parameters file (``None``: the bundled one).

    Raises:
        ProtocolError: the file is missing, not YAML, or breaks the schema;
            the message names the file, the key and the value.
    """
    if path is None:
        data = resources.files(__package__).joinpath(BUNDLED_PARAMS).read_bytes()
        source = "bundled"
    else:
        source = str(path)
        try:
            data = path.read_bytes()
        except OSError as error:
            raise ProtocolError(source, None, f"cannot be read: {error.strerror}") from None
    try:
        raw = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        raise ProtocolError(source, None, f"not valid YAML: {error}") from None
    if not isinstance(raw, dict):
        raise ProtocolError(source, None, "expected a mapping of parameters")
    try:
        params = ReplayParams.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or None
        problem = str(first["msg"]).removeprefix("Value error, ")
        if key is not None:  # the whole document is no value to quote
            problem += f" (got {first.get('input')!r})"
        raise ProtocolError(source, key, problem) from None
    return LoadedParams(params, source, hashlib.sha256(data).hexdigest())
