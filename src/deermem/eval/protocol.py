"""The protocol: a config, two case manifests and an answer prompt, read strictly and cross-checked.

Loading a protocol is the *contract load* every ``deermem eval`` command runs
first (reference ``eval-harness-spec.md`` §1.1): each file is read once, hashed
from the same bytes it is parsed from, validated strictly, and then checked
against the others and against the production code — one protocol id across
the three files, the grader version the config pins equal to the grader
deermem ships, the ``hybrid-v1`` version the config requires equal to the one
deermem implements, the prompt's SHA-256 equal to the config's pin.

**The files.** Their schemas are the original harness's (§2.1–§2.4), key for
key, so its own bundle loads here unchanged; deermem's ships in ``bundled/``
(:func:`bundled_protocol_files`). Each file is a strict, frozen pydantic model
— no unknown key, no missing key, no coercion (``True`` is not a number,
``"7"`` is not an int, an int is a valid float) — and a refusal is a
:class:`~deermem.eval.errors.ProtocolError` naming the file, the dotted key
(``pool.capacities[2]``) and the value. The official manifest holds only
identifiers and the rule that picked them, never dataset text; the rule is
recomputed against the dataset on every run (:mod:`deermem.eval.dataset`), so
a manifest cannot silently drift from the file it claims to describe. The
synthetic manifest holds the five correction cases in full, since they are
ours.

**YAML.** The config is parsed by PyYAML's safe loader (its libyaml
implementation when PyYAML was built with it), so values are those
``yaml.safe_load`` gives, YAML 1.1 scalars included (``yes`` is ``True``,
``0.10`` is ``0.1``, an unquoted timestamp is a ``datetime``). One check needs
the document before it is turned into dictionaries: a key given twice in one
mapping. The safe loader keeps the last value without a word, so an edited
config could pin one thing and run another; :func:`load_yaml` refuses it,
naming the dotted key and both lines.

**The answer prompt** is a ``SYSTEM:`` part and a ``USER:`` part separated by
a blank line, the user part carrying three placeholders. The wording is each
bundle's own; the protocol pins the file's SHA-256, so a changed word is a
changed protocol. Rendering is plain sequential string replacement, exactly as
the original does it, because the request fingerprint of every QA row hashes
its result.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final, NamedTuple, TypeVar, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from deermem.errors import preview
from deermem.eval import PROVIDER_OPENAI_COMPATIBLE
from deermem.eval.errors import EvaluationError, ProtocolError
from deermem.eval.files import (
    IDENTIFIER,
    IDENTIFIER_RULE,
    SHA256,
    InvalidJsonError,
    parse_json,
    utc_timestamp,
)
from deermem.eval.grading import GRADER_VERSION, StatisticsParameters
from deermem.policy import POLICY_CONFIDENCE, POLICY_HYBRID_V1, CapacityPolicy
from deermem.store.markdown.files import read_regular_file

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # PyYAML built without libyaml: the same rules in Python
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

__all__ = [
    "Protocol",
    "ProtocolFiles",
    "bundled_protocol_files",
    "load_config",
    "load_protocol",
]

BUNDLE_DIRECTORY: Final = Path(__file__).parent / "bundled"

SCENARIO_CONFIRMATION_HELP: Final = "confirmation_help"
SCENARIO_ACCESS_HELP: Final = "access_help"
SCENARIO_CONFIDENCE_CONTROL: Final = "confidence_control"
SCENARIO_NOISY_SIGNAL_CONTROL: Final = "noisy_signal_control"
SCENARIO_CORRECTION_RESERVE: Final = "correction_reserve"
OFFICIAL_SCENARIOS: Final = (
    SCENARIO_CONFIRMATION_HELP,
    SCENARIO_ACCESS_HELP,
    SCENARIO_CONFIDENCE_CONTROL,
    SCENARIO_NOISY_SIGNAL_CONTROL,
)
"""The registered official scenarios (each has its metadata rule in :mod:`deermem.eval.dataset`)."""
ELIGIBLE_QUESTION_TYPES: Final = ("knowledge-update", "temporal-reasoning")
CASES_PER_SCENARIO: Final = 10
SYNTHETIC_CASES: Final = 5
MAX_LOSS_RANK: Final = 10
"""The scenario rules and loss ranks (1..10) are defined on ten-fact pools."""
WEIGHT_TOLERANCE: Final = 1e-9

_HEX_40: Final = re.compile(r"[0-9a-f]{40}")


def scenario_rank(scenario: str) -> tuple[int, str]:
    """Where a scenario sorts in tables: registered ones in protocol order, others after by name."""
    if scenario in OFFICIAL_SCENARIOS:
        return (OFFICIAL_SCENARIOS.index(scenario), "")
    return (len(OFFICIAL_SCENARIOS), scenario)


# --- reading YAML ---------------------------------------------------------------------------------

_MERGE_TAG: Final = "tag:yaml.org,2002:merge"


class YAMLSyntaxError(ValueError):
    """The text is not valid YAML; the message says where (line and column)."""


class RepeatedKeyError(ValueError):
    """A mapping gives the same key twice.

    Attributes:
        key: the dotted key (``"pool.capacities"``).
        first_line: the line of the first occurrence (1-based).
        second_line: the line of the repetition.
    """

    def __init__(self, key: str, first_line: int, second_line: int) -> None:
        self.key = key
        self.first_line = first_line
        self.second_line = second_line
        super().__init__(
            f"is given twice (lines {first_line} and {second_line}); a key may appear once"
        )


def load_yaml(text: str) -> object:
    """Parse one YAML document with PyYAML's safe loader, refusing repeated keys.

    Raises:
        YAMLSyntaxError: the text is not a single valid YAML document.
        RepeatedKeyError: a mapping holds a key twice.
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:  # an empty document
            return None
        _check_unique_keys(loader, node, "", set())
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        raise YAMLSyntaxError(" ".join(str(error).split())) from None
    finally:
        loader.dispose()


def _check_unique_keys(loader: _Loader, node: Node, path: str, seen: set[int]) -> None:
    """Walk the composed document; raise on the first mapping with a repeated scalar key.

    ``seen`` holds the nodes already walked: an alias refers to its anchor's
    node, which may contain the alias itself.
    """
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, MappingNode):
        keys: dict[object, ScalarNode] = {}
        for key_node, value_node in node.value:
            child = path
            if isinstance(key_node, ScalarNode) and key_node.tag != _MERGE_TAG:
                key = loader.construct_object(key_node)
                child = f"{path}.{key}" if path else str(key)
                first = keys.setdefault(key, key_node)
                if first is not key_node:
                    raise RepeatedKeyError(
                        child, first.start_mark.line + 1, key_node.start_mark.line + 1
                    )
            _check_unique_keys(loader, value_node, child, seen)
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            _check_unique_keys(loader, item, f"{path}[{index}]", seen)


# --- the rules a value must keep ------------------------------------------------------------------


class _Refusal(ValueError):
    """A rule's refusal of a value: what is wrong and, below the value checked, where.

    ``key`` is relative to the value the rule checked: ``"capacities[2]"``
    from the pool's own check; empty when the value itself is wrong.
    """

    def __init__(self, problem: str, key: str = "") -> None:
        super().__init__(problem)
        self.key = key


def _rule(check: Callable[[Any], str | None]) -> AfterValidator:
    """A validator from ``check(value) -> problem or None``; the value passes through unchanged."""

    def validate(value: Any) -> Any:
        problem = check(value)
        if problem is not None:
            raise _Refusal(problem)
        return value

    return AfterValidator(validate)


def _exactly(expected: object) -> BeforeValidator:
    """One exact value, of its exact type (``1.0`` and ``True`` are not the literal ``1``)."""

    def validate(value: object) -> object:
        if type(value) is not type(expected) or value != expected:
            raise _Refusal(f"must be {expected!r}, got {preview(value)}")
        return value

    return BeforeValidator(validate)


def _range(low: float | None = None, high: float | None = None) -> AfterValidator:
    """``low <= value <= high``, either bound optional."""

    def check(value: float) -> str | None:
        if (low is None or value >= low) and (high is None or value <= high):
            return None
        if low is None:
            return f"must be at most {high}, got {value!r}"
        if high is None:
            return f"must be at least {low}, got {value!r}"
        return f"must be from {low} to {high}, got {value!r}"

    return _rule(check)


def _matching(pattern: re.Pattern[str], meaning: str) -> AfterValidator:
    return _rule(
        lambda value: (
            None if pattern.fullmatch(value) else f"must be {meaning}, got {preview(value)}"
        )
    )


def _filled(value: Sequence[object]) -> str | None:
    return "must not be empty" if not value else None


def _distinct(items: Sequence[object]) -> str | None:
    seen: set[object] = set()
    repeated: list[object] = []
    for item in items:
        if item in seen:
            repeated.append(item)
        seen.add(item)
    return f"must not repeat values; repeated: {preview(repeated)}" if repeated else None


def _plain(value: str) -> str | None:
    # Case ids become parts of fact ids and, later, of file names: keep them plain.
    if IDENTIFIER.fullmatch(value):
        return None
    return f"is not a plain identifier ({IDENTIFIER_RULE}): {preview(value)}"


def _timestamp(value: object) -> datetime:
    """An aware ISO 8601 timestamp (a string, or an unquoted YAML one's ``datetime``) in UTC."""
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise _Refusal(f"must be an ISO 8601 timestamp, got {preview(value)}") from None
    elif isinstance(value, datetime):
        moment = value
    else:
        raise _Refusal(f"must be a timestamp, got {preview(value)}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise _Refusal(f"must include a time zone, got {preview(value)}")
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise _Refusal(f"must lie between years 1 and 9999 in UTC, got {preview(value)}") from None


# Values as a strict schema reads them: no coercion between types.
Whole = Annotated[int, Strict()]
Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]  # an int is a valid float
Text = Annotated[str, Strict(), _rule(_filled)]
Texts = Annotated[tuple[Text, ...], _rule(_filled), _rule(_distinct)]
Identifier = Annotated[str, Strict(), _rule(_plain)]
Share = Annotated[Number, _range(0.0, 1.0)]
Hex64 = Annotated[str, Strict(), _matching(SHA256, "64 lowercase hex digits")]


class _Schema(BaseModel):
    """A section of a protocol file: every key required, none unknown, frozen once read."""

    # defer_build: the schemas are built when a file is first read, not when deermem starts.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


_Model = TypeVar("_Model", bound=BaseModel)


def validated(schema: type[_Model], data: object, *, file: str) -> _Model:
    """``data`` (a parsed file) as ``schema``; the first problem is a :class:`ProtocolError`.

    Unknown and missing keys of one section are reported together, with the
    keys the section expects; any other problem names its dotted key and, for
    a wrong value, the value.
    """
    try:
        return schema.model_validate(data)
    except ValidationError as error:
        raise _protocol_error(error, schema, file) from None


def _protocol_error(error: ValidationError, schema: type[BaseModel], file: str) -> ProtocolError:
    details = error.errors(include_url=False)
    key_errors = [d for d in details if d["type"] in ("missing", "extra_forbidden")]
    if key_errors:
        section = min((tuple(d["loc"][:-1]) for d in key_errors), key=len)
        here = [d for d in key_errors if tuple(d["loc"][:-1]) == section]
        unknown = sorted(str(d["loc"][-1]) for d in here if d["type"] == "extra_forbidden")
        missing = [str(d["loc"][-1]) for d in here if d["type"] == "missing"]
        problems = []
        if unknown:
            problems.append(f"unknown key(s) {', '.join(map(repr, unknown))}")
        if missing:
            problems.append(f"missing key(s) {', '.join(map(repr, missing))}")
        problems.append(f"expected exactly: {', '.join(_keys_at(schema, section))}")
        return ProtocolError(file, _dotted(section), "; ".join(problems))
    detail = details[0]
    location = tuple(detail["loc"])
    cause = (detail.get("ctx") or {}).get("error")
    if isinstance(cause, _Refusal):
        key = _dotted(location) or ""
        if cause.key:
            key = f"{key}{'' if cause.key.startswith('[') or not key else '.'}{cause.key}"
        return ProtocolError(file, key or None, str(cause))
    wanted = _TYPE_PROBLEMS.get(detail["type"], detail["msg"])
    # A whole file of the wrong kind (a dataset given as the config) is named by its kind:
    # its text is not quoted.
    got = f"a {type(detail['input']).__name__}" if not location else preview(detail["input"])
    return ProtocolError(file, _dotted(location), f"{wanted}, got {got}")


# What a wrong type is called, by pydantic's error type.
_TYPE_PROBLEMS: Final = {
    "int_type": "must be a whole number",
    "float_type": "must be a number",
    "finite_number": "must be finite",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
}


def _dotted(location: tuple[int | str, ...]) -> str | None:
    """``("pool", "capacities", 2)`` as ``"pool.capacities[2]"``; ``None`` for the whole file."""
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or None


def _keys_at(schema: type[BaseModel], location: tuple[int | str, ...]) -> tuple[str, ...]:
    """The keys the section at ``location`` of ``schema`` expects."""
    current: object = schema
    for part in location:
        if isinstance(current, type) and issubclass(current, BaseModel):
            current = current.model_fields[str(part)].annotation
        else:  # a list or a mapping: its items' type
            current = [arg for arg in get_args(current) if arg is not Ellipsis][-1]
        while get_origin(current) is Annotated:
            current = get_args(current)[0]
    if isinstance(current, type) and issubclass(current, BaseModel):
        return tuple(current.model_fields)
    return ()


# --- the config -----------------------------------------------------------------------------------


class DatasetPin(_Schema):
    """The one dataset file every command accepts: where it comes from and its hash."""

    repository: Text
    revision: Annotated[str, Strict(), _matching(_HEX_40, "40 lowercase hex digits")]
    filename: Text
    sha256: Hex64

    def provenance(self, sha256: str) -> dict[str, str]:
        """The ``dataset`` block of a run record, naming the file a run read by its hash."""
        return {
            "repository": self.repository,
            "revision": self.revision,
            "filename": self.filename,
            "sha256": sha256,
        }


class PoolSettings(_Schema):
    """How each case's pool of facts is built and which caps it is run at."""

    size: Annotated[Whole, _range(2)]
    capacities: Annotated[tuple[Whole, ...], _rule(_filled), _rule(_distinct)]
    qa_capacity: Whole
    distractors: Whole
    distractor_bank_size: Whole
    distractor_types: Texts
    distractor_min_evidence_chars: Annotated[Whole, _range(0)]
    distractor_max_evidence_chars: Annotated[Whole, _range(0)]
    offset_namespace: Text
    fact_order: Annotated[str, _exactly("fact-id")]

    @model_validator(mode="after")
    def _consistent(self) -> PoolSettings:
        for position, capacity in enumerate(self.capacities):
            if not 1 <= capacity <= self.size - 1:
                raise _Refusal(
                    f"must be a whole number from 1 to {self.size - 1}, got {capacity}",
                    f"capacities[{position}]",
                )
        if self.qa_capacity not in self.capacities:
            raise _Refusal(
                f"must be one of pool.capacities {list(self.capacities)}, got {self.qa_capacity}",
                "qa_capacity",
            )
        if self.distractors != self.size - 1:
            raise _Refusal(
                f"must equal pool.size - 1 = {self.size - 1}, got {self.distractors}",
                "distractors",
            )
        if self.distractor_bank_size < self.distractors:
            raise _Refusal(
                f"must be at least pool.distractors = {self.distractors}, "
                f"got {self.distractor_bank_size}",
                "distractor_bank_size",
            )
        low, high = self.distractor_min_evidence_chars, self.distractor_max_evidence_chars
        if low > high:
            raise _Refusal(
                f"must be at least distractor_min_evidence_chars = {low}, got {high}",
                "distractor_max_evidence_chars",
            )
        return self


class Weights(_Schema):
    """``hybrid-v1``'s weights of its three terms, in the order of the score."""

    confidence: Share
    confirmation: Share
    access: Share

    @model_validator(mode="after")
    def _sum_to_one(self) -> Weights:
        total = self.confidence + self.confirmation + self.access
        if abs(total - 1.0) > WEIGHT_TOLERANCE:
            raise _Refusal(
                f"must sum to 1 (within {WEIGHT_TOLERANCE}); confidence {self.confidence!r} + "
                f"confirmation {self.confirmation!r} + access {self.access!r} = {total!r}"
            )
        return self


class ConfidencePolicy(_Schema):
    policy: Annotated[str, _exactly(POLICY_CONFIDENCE)]


class HybridPolicy(_Schema):
    """The ``hybrid-v1`` parameters the protocol runs the production selector with."""

    policy: Annotated[str, _exactly(POLICY_HYBRID_V1)]
    weights: Weights
    confirmation_half_life_days: Annotated[Whole, _range(1)]
    access_half_life_days: Annotated[Whole, _range(1)]
    correction_reserved_fraction: Share
    correction_reserved_max: Annotated[Whole, _range(0)]


class Policies(_Schema):
    confidence: ConfidencePolicy
    hybrid_v1: HybridPolicy


class AnswerPromptPin(_Schema):
    """The answer prompt file (relative to the config) and its pinned SHA-256."""

    path: Text
    sha256: Hex64


class QASettings(_Schema):
    """The question-answering run: model, request parameters, grader version.

    Only the *names* of the environment variables holding the endpoint and
    the key are part of the protocol, never their values.
    """

    answer_prompt: AnswerPromptPin
    grader_version: Text
    provider: Annotated[str, _exactly(PROVIDER_OPENAI_COMPATIBLE)]
    api_key_env: Text
    base_url_env: Text
    model: Text
    temperature: Annotated[Number, _range(0.0)]
    max_tokens: Annotated[Whole, _range(1)]
    stream: Annotated[
        bool,
        Strict(),
        _rule(
            lambda value: (
                "must be false: the answer run reads each answer whole, not streamed"
                if value
                else None
            )
        ),
    ]
    timeout_seconds: Annotated[Whole, _range(1)]
    max_attempts: Annotated[Whole, _range(1)]
    workers: Annotated[Whole, _range(1)]


class StatisticsSettings(_Schema):
    """The paired statistics: bootstrap seed, iterations and the two-sided alpha."""

    bootstrap_seed: Whole
    bootstrap_iterations: Annotated[Whole, _range(1)]
    alpha: Annotated[
        Number,
        _rule(
            lambda value: (
                None
                if 0.0 < value < 1.0
                else f"must be strictly between 0.0 and 1.0, got {value!r}"
            )
        ),
    ]

    @property
    def parameters(self) -> StatisticsParameters:
        """The statistics' parameters as the bootstrap takes them."""
        return StatisticsParameters(
            seed=self.bootstrap_seed, iterations=self.bootstrap_iterations, alpha=self.alpha
        )


class EvaluationConfig(_Schema):
    """A protocol configuration (reference §2.1), key for key.

    Attributes:
        required_policy_version: the ``hybrid-v1`` version the protocol was
            designed for; checked against the production constant when the
            protocol is loaded.
        evaluation_time: the fixed clock of every decision, aware and in UTC.
    """

    schema_version: Annotated[int, _exactly(1)]
    protocol_id: Text
    required_policy_version: Text
    evaluation_time: Annotated[datetime, BeforeValidator(_timestamp)]
    dataset: DatasetPin
    pool: PoolSettings
    policies: Policies
    qa: QASettings
    statistics: StatisticsSettings

    @property
    def hybrid(self) -> CapacityPolicy:
        """The production selector's ``hybrid-v1`` policy with this protocol's parameters."""
        section = self.policies.hybrid_v1
        return CapacityPolicy(
            name=POLICY_HYBRID_V1,
            confidence_weight=section.weights.confidence,
            confirmation_weight=section.weights.confirmation,
            access_weight=section.weights.access,
            confirmation_half_life_days=section.confirmation_half_life_days,
            access_half_life_days=section.access_half_life_days,
            correction_reserved_fraction=section.correction_reserved_fraction,
            correction_reserved_max=section.correction_reserved_max,
        )


# --- the manifests --------------------------------------------------------------------------------


def _eligible(question_type: str) -> str | None:
    if question_type in ELIGIBLE_QUESTION_TYPES:
        return None
    return f"must be one of {', '.join(ELIGIBLE_QUESTION_TYPES)}, got {preview(question_type)}"


class SelectionRule(_Schema):
    """How the 40 official questions are picked from the dataset (§3.2)."""

    eligible_question_types: Annotated[
        tuple[Annotated[Text, _rule(_eligible)], ...], _rule(_filled), _rule(_distinct)
    ]
    excluded_pilot_ids: Annotated[tuple[Text, ...], _rule(_distinct)]
    exclude_abstention_suffix: Text
    answer_min_chars: Annotated[Whole, _range(0)]
    answer_max_chars: Whole
    answer_excluded_substrings: Annotated[tuple[Text, ...], _rule(_distinct)]
    evidence_min_chars: Annotated[Whole, _range(0)]
    evidence_max_chars: Whole
    take_per_question_type: Annotated[Whole, _range(1)]
    cases_per_type_per_scenario: Annotated[Whole, _range(1)]

    @model_validator(mode="after")
    def _bounds(self) -> SelectionRule:
        for low, high in (
            ("answer_min_chars", "answer_max_chars"),
            ("evidence_min_chars", "evidence_max_chars"),
        ):
            minimum, value = getattr(self, low), getattr(self, high)
            if value < minimum:
                raise _Refusal(f"must be at least {minimum}, got {value}", high)
        return self


class OfficialManifest(_Schema):
    """The pinned LongMemEval questions, grouped by scenario (§2.2).

    Attributes:
        scenario_order: the order cases are built and reported in.
        loss_ranks: the support fact's rank among the ten facts of a pool, by
            position within a scenario (after sorting its ids by type, id).
        scenarios: scenario → its ten question ids, as pinned.
    """

    schema_version: Annotated[int, _exactly(1)]
    protocol_id: Text
    selection: SelectionRule
    scenario_order: Texts
    loss_ranks: Annotated[
        tuple[Annotated[Whole, _range(1, MAX_LOSS_RANK)], ...],
        _rule(
            lambda ranks: (
                None
                if len(ranks) == CASES_PER_SCENARIO
                else f"must hold {CASES_PER_SCENARIO} values (one per case of a scenario), "
                f"got {len(ranks)}"
            )
        ),
    ]
    scenarios: dict[str, Annotated[tuple[Identifier, ...], _rule(_filled), _rule(_distinct)]]

    @property
    def question_ids(self) -> tuple[str, ...]:
        """Every pinned id, scenario by scenario in ``scenario_order``."""
        return tuple(qid for name in self.scenario_order for qid in self.scenarios[name])

    @field_validator("scenario_order")
    @classmethod
    def _registered(cls, order: tuple[str, ...]) -> tuple[str, ...]:
        if sorted(order) != sorted(OFFICIAL_SCENARIOS):
            raise _Refusal(
                "must list each registered scenario exactly once "
                f"({', '.join(OFFICIAL_SCENARIOS)}), got {list(order)}"
            )
        return order

    @field_validator("scenarios", mode="before")
    @classmethod
    def _registered_scenarios(cls, scenarios: object) -> object:
        """Exactly the registered scenarios, checked before their ids are."""
        if not isinstance(scenarios, dict):
            return scenarios  # the mapping's own check names it
        unknown = sorted(str(name) for name in set(scenarios) - set(OFFICIAL_SCENARIOS))
        missing = [name for name in OFFICIAL_SCENARIOS if name not in scenarios]
        if unknown or missing:
            problems = [f"unknown key(s) {', '.join(map(repr, unknown))}"] if unknown else []
            problems += [f"missing key(s) {', '.join(map(repr, missing))}"] if missing else []
            problems.append(f"expected exactly: {', '.join(OFFICIAL_SCENARIOS)}")
            raise _Refusal("; ".join(problems))
        return scenarios

    @field_validator("scenarios")
    @classmethod
    def _pinned_once(cls, scenarios: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        owner: dict[str, str] = {}
        for name in OFFICIAL_SCENARIOS:
            ids = scenarios[name]
            if len(ids) != CASES_PER_SCENARIO:
                raise _Refusal(f"must hold {CASES_PER_SCENARIO} question ids, got {len(ids)}", name)
            for position, qid in enumerate(ids):
                if qid in owner:
                    raise _Refusal(
                        f"question id {qid!r} is already pinned under {owner[qid]!r}",
                        f"{name}[{position}]",
                    )
                owner[qid] = name
        return {name: scenarios[name] for name in OFFICIAL_SCENARIOS}

    @model_validator(mode="after")
    def _grouping(self) -> OfficialManifest:
        """The rule must pick what the scenarios hold: 4 × 5 per type, 2 × 5 per scenario."""
        rule = self.selection
        wanted = len(OFFICIAL_SCENARIOS) * rule.cases_per_type_per_scenario
        if rule.take_per_question_type != wanted:
            raise _Refusal(
                f"must equal {len(OFFICIAL_SCENARIOS)} scenarios x cases_per_type_per_scenario "
                f"{rule.cases_per_type_per_scenario} = {wanted}, "
                f"got {rule.take_per_question_type}",
                "selection.take_per_question_type",
            )
        per_scenario = len(rule.eligible_question_types) * rule.cases_per_type_per_scenario
        if per_scenario != CASES_PER_SCENARIO:
            raise _Refusal(
                f"{len(rule.eligible_question_types)} question types x "
                f"{rule.cases_per_type_per_scenario} cases must give the {CASES_PER_SCENARIO} "
                f"cases of a scenario, got {per_scenario}",
                "selection.cases_per_type_per_scenario",
            )
        return self


class SyntheticCase(_Schema):
    """One correction case: the support fact, the question, the expected answer."""

    case_id: Identifier
    support_fact: Text
    question: Text
    answer: Text
    loss_rank: Annotated[Whole, _range(1, MAX_LOSS_RANK)]


class SyntheticManifest(_Schema):
    """The five correction cases of the ``correction_reserve`` scenario (§2.3)."""

    schema_version: Annotated[int, _exactly(1)]
    protocol_id: Text
    scenario: Annotated[str, _exactly(SCENARIO_CORRECTION_RESERVE)]
    cases: Annotated[
        tuple[SyntheticCase, ...],
        _rule(
            lambda cases: (
                None
                if len(cases) == SYNTHETIC_CASES
                else f"must be a list of {SYNTHETIC_CASES} cases, got {len(cases)}"
            )
        ),
    ]

    @model_validator(mode="after")
    def _distinct_ids(self) -> SyntheticManifest:
        seen: set[str] = set()
        for position, case in enumerate(self.cases):
            if case.case_id in seen:
                raise _Refusal(
                    f"repeats the case id {case.case_id!r}", f"cases[{position}].case_id"
                )
            seen.add(case.case_id)
        return self


# --- the answer prompt ----------------------------------------------------------------------------

CURRENT_DATE_SECTION: Final = "{{CURRENT_DATE_SECTION}}"
STORED_MEMORY: Final = "{{STORED_MEMORY}}"
QUESTION: Final = "{{QUESTION}}"
_SYSTEM_HEADER: Final = "SYSTEM:\n"
_SEPARATOR: Final = "\n\nUSER:\n"


class AnswerTemplate(NamedTuple):
    """A parsed answer prompt.

    Attributes:
        system: the system message, as sent.
        user: the user message with its placeholders still in place.
    """

    system: str
    user: str

    @classmethod
    def parse(cls, text: str, *, file: str) -> AnswerTemplate:
        """Split a prompt file into its two parts and check the placeholders.

        Raises:
            ProtocolError: the file lacks the ``SYSTEM:``/``USER:`` structure
                or a placeholder.
        """
        if not text.startswith(_SYSTEM_HEADER) or _SEPARATOR not in text:
            raise ProtocolError(
                file,
                None,
                "an answer prompt must start with a 'SYSTEM:' line and hold a 'USER:' line "
                "after a blank line",
            )
        system, user = text[len(_SYSTEM_HEADER) :].split(_SEPARATOR, 1)
        for placeholder in (CURRENT_DATE_SECTION, STORED_MEMORY, QUESTION):
            if placeholder not in user:
                raise ProtocolError(
                    file, None, f"the USER part of the answer prompt lacks {placeholder}"
                )
        return cls(system=system.strip("\n"), user=user.strip("\n"))

    def render(
        self,
        *,
        question: str,
        question_date: str | None,
        facts: Sequence[tuple[str, str]],
    ) -> list[dict[str, str]]:
        """The chat messages for one question over the retained facts.

        Args:
            question: the question text.
            question_date: the question's date line; ``None`` or empty omits it.
            facts: ``(fact_id, content)`` pairs; rendered sorted by id, each as
                ``[id]`` on one line and its content below, separated by a
                blank line.

        Raises:
            EvaluationError: no facts, or two facts with the same id.
        """
        if not facts:
            raise EvaluationError("an answer prompt needs at least one retained fact")
        ordered = sorted(facts, key=lambda fact: fact[0])
        for previous, current in itertools.pairwise(ordered):
            if previous[0] == current[0]:
                raise EvaluationError(f"retained fact id {current[0]!r} appears twice")
        memory = "\n\n".join(f"[{fact_id}]\n{content}" for fact_id, content in ordered)
        date_section = f"CURRENT DATE: {question_date}\n" if question_date else ""
        user = (
            self.user.replace(CURRENT_DATE_SECTION, date_section)
            .replace(STORED_MEMORY, memory)
            .replace(QUESTION, question)
        )
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


# --- the bundle -----------------------------------------------------------------------------------


class ProtocolFiles(NamedTuple):
    """Where the three protocol files are; the prompt's path comes from the config."""

    config: Path
    official_manifest: Path
    synthetic_manifest: Path


def bundled_protocol_files() -> ProtocolFiles:
    """deermem's own protocol bundle, shipped inside the package."""
    return ProtocolFiles(
        config=BUNDLE_DIRECTORY / "pr4789-reproduction-v1.yaml",
        official_manifest=BUNDLE_DIRECTORY / "official-pr4789-v1.json",
        synthetic_manifest=BUNDLE_DIRECTORY / "synthetic-corrections-v1.json",
    )


class ProtocolArtifacts(NamedTuple):
    """The SHA-256 of each protocol file's raw bytes: the run's identity.

    A QA run adds the dataset's hash to these four (reference §2.5).
    """

    config_sha256: str
    official_manifest_sha256: str
    synthetic_manifest_sha256: str
    answer_prompt_sha256: str


class Protocol(NamedTuple):
    """A loaded, cross-checked protocol bundle.

    Attributes:
        files: the three files it was loaded from.
        answer_prompt_path: where the prompt was found.
        artifacts: the four file hashes.
    """

    config: EvaluationConfig
    official: OfficialManifest
    synthetic: SyntheticManifest
    answer_template: AnswerTemplate
    files: ProtocolFiles
    answer_prompt_path: Path
    artifacts: ProtocolArtifacts

    @property
    def protocol_id(self) -> str:
        return self.config.protocol_id

    @property
    def case_count(self) -> int:
        return len(self.official.question_ids) + len(self.synthetic.cases)

    def run_header(
        self,
        *,
        schema_version: int,
        dataset_sha256: str,
        created_at: datetime | None,
        git: Mapping[str, object] | None,
    ) -> dict[str, object]:
        """What every run record (``run.json``, ``qa_run.json``) begins with.

        The schema version, the protocol, when (wall clock, UTC), which code
        (``git``, ``null`` outside a checkout) and which dataset file.
        """
        return {
            "schema_version": schema_version,
            "protocol_id": self.protocol_id,
            "created_at": utc_timestamp(created_at),
            "git": dict(git) if git is not None else None,
            "dataset": self.config.dataset.provenance(dataset_sha256),
        }


def load_protocol(files: ProtocolFiles | None = None) -> Protocol:
    """Load and cross-check a protocol bundle (deermem's own by default).

    Raises:
        ProtocolError: a file is missing, unreadable or invalid, or the files
            disagree with each other or with the production code. The error
            names the file and the key.
    """
    files = files or bundled_protocol_files()
    config_bytes = _read(files.config)
    official_bytes = _read(files.official_manifest)
    synthetic_bytes = _read(files.synthetic_manifest)
    config = validated(
        EvaluationConfig, parse_yaml(str(files.config), config_bytes), file=str(files.config)
    )
    official = validated(
        OfficialManifest,
        _parse_json(files.official_manifest, official_bytes),
        file=str(files.official_manifest),
    )
    synthetic = validated(
        SyntheticManifest,
        _parse_json(files.synthetic_manifest, synthetic_bytes),
        file=str(files.synthetic_manifest),
    )
    _check_agreement(files, config, official, synthetic)
    prompt_path = _prompt_path(files.config, config.qa.answer_prompt.path)
    prompt_bytes = _read(prompt_path)
    prompt_sha256 = _sha256(prompt_bytes)
    if prompt_sha256 != config.qa.answer_prompt.sha256:
        raise ProtocolError(
            str(files.config),
            "qa.answer_prompt.sha256",
            f"pins {config.qa.answer_prompt.sha256} but {prompt_path} has SHA-256 {prompt_sha256}",
        )
    template = AnswerTemplate.parse(_decode(str(prompt_path), prompt_bytes), file=str(prompt_path))
    return Protocol(
        config=config,
        official=official,
        synthetic=synthetic,
        answer_template=template,
        files=files,
        answer_prompt_path=prompt_path,
        artifacts=ProtocolArtifacts(
            config_sha256=_sha256(config_bytes),
            official_manifest_sha256=_sha256(official_bytes),
            synthetic_manifest_sha256=_sha256(synthetic_bytes),
            answer_prompt_sha256=prompt_sha256,
        ),
    )


def load_config(path: Path) -> EvaluationConfig:
    """Read and validate one config file on its own (no manifests, no prompt).

    For commands that need only the config's settings, such as the statistics
    parameters ``verify`` re-derives a report with.

    Raises:
        ProtocolError: the file is missing, unreadable or invalid.
    """
    return validated(EvaluationConfig, parse_yaml(str(path), _read(path)), file=str(path))


def _check_agreement(
    files: ProtocolFiles,
    config: EvaluationConfig,
    official: OfficialManifest,
    synthetic: SyntheticManifest,
) -> None:
    for path, manifest_id in (
        (files.official_manifest, official.protocol_id),
        (files.synthetic_manifest, synthetic.protocol_id),
    ):
        if manifest_id != config.protocol_id:
            raise ProtocolError(
                str(path),
                "protocol_id",
                f"is {manifest_id!r} but the config {files.config} is {config.protocol_id!r}; "
                "pass the manifests of the same protocol (--official-manifest, "
                "--synthetic-manifest)",
            )
    if config.qa.grader_version != GRADER_VERSION:
        # Grades are only comparable under one frozen grader; a protocol pins it.
        raise ProtocolError(
            str(files.config),
            "qa.grader_version",
            f"pins grader {config.qa.grader_version!r} but this deermem grades with "
            f"{GRADER_VERSION!r}; a protocol is graded only by the grader it pins",
        )
    if config.required_policy_version != POLICY_HYBRID_V1:
        raise ProtocolError(
            str(files.config),
            "required_policy_version",
            f"requires eviction policy {config.required_policy_version!r} but this deermem "
            f"implements {POLICY_HYBRID_V1!r}",
        )
    if config.pool.size != MAX_LOSS_RANK:
        # The scenario rules and loss ranks (1..10) are defined on ten-fact pools.
        raise ProtocolError(
            str(files.config),
            "pool.size",
            f"the registered scenarios need pools of {MAX_LOSS_RANK} facts "
            f"(one support fact and {MAX_LOSS_RANK - 1} distractors), got {config.pool.size}",
        )


def _prompt_path(config_path: Path, relative: str) -> Path:
    """Resolve the prompt path: next to the config, else from the bundle root.

    Paths in a config are relative to the config file. The original project
    keeps configs in a ``configs/`` folder and resolves the prompt from the
    folder above it; that location is tried second, so its config loads
    unchanged. The pinned SHA-256 makes picking the wrong file impossible.
    """
    candidate = Path(relative)
    if candidate.is_absolute():
        return candidate
    tried = [config_path.parent / candidate, config_path.parent.parent / candidate]
    for path in tried:
        if path.is_file():
            return path
    raise ProtocolError(
        str(config_path),
        "qa.answer_prompt.path",
        f"no file {relative!r} next to the config or in the bundle root "
        f"(tried {tried[0]} and {tried[1]})",
    )


def _read(path: Path) -> bytes:
    try:
        return read_regular_file(path)
    except OSError as error:
        raise ProtocolError(
            str(path), None, f"cannot read the file: {error.strerror or error}"
        ) from None


def _decode(file: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ProtocolError(file, None, f"is not UTF-8 text (byte {error.start})") from None


def parse_yaml(file: str, data: bytes) -> object:
    """A YAML file's document (:func:`load_yaml`); a problem is a :class:`ProtocolError`."""
    try:
        return load_yaml(_decode(file, data))
    except YAMLSyntaxError as error:
        raise ProtocolError(file, None, f"is not valid YAML: {error}") from None
    except RepeatedKeyError as error:
        raise ProtocolError(file, error.key, str(error)) from None


def _parse_json(path: Path, data: bytes) -> object:
    try:
        return parse_json(_decode(str(path), data))
    except InvalidJsonError as error:
        raise ProtocolError(str(path), None, f"is not valid JSON: {error.reason}") from None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
