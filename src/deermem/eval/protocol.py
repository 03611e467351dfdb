"""The protocol: its four files, read strictly and cross-checked.

(Being rewritten on pydantic models; see the next commit.)
"""

from __future__ import annotations

from typing import Final

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # PyYAML built without libyaml: the same rules in Python
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]
import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from deermem.eval.errors import EvaluationError, ProtocolError
from deermem.eval.grading import GRADER_VERSION
from deermem.policy import POLICY_HYBRID_V1

# --- eval/protocol/_yaml.py -----------------------------------------------------------------------

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


# --- eval/protocol/_checks.py ---------------------------------------------------------------------

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


# --- eval/protocol/config.py ----------------------------------------------------------------------

WEIGHT_TOLERANCE: Final = 1e-9
PROVIDER_OPENAI_COMPATIBLE: Final = "openai-compatible"
"""The one provider a protocol config may name (``qa.provider``)."""
PROVIDER_LOCAL: Final = "local"
"""``run-qa --provider local``: the embedded model instead of the config's endpoint."""
# The weight keys, in the order of the score's terms.
_WEIGHT_KEYS: Final = ("confidence", "confirmation", "access")


class DatasetPin(NamedTuple):
    """The one dataset file every command accepts: where it comes from and its hash."""

    repository: str
    revision: str
    filename: str
    sha256: str

    def provenance(self, sha256: str) -> dict[str, str]:
        """The ``dataset`` block of a run record, naming the file a run read by its hash."""
        return {
            "repository": self.repository,
            "revision": self.revision,
            "filename": self.filename,
            "sha256": sha256,
        }


class PoolSettings(NamedTuple):
    """How each case's pool of facts is built and which caps it is run at."""

    size: int
    capacities: tuple[int, ...]
    qa_capacity: int
    distractors: int
    distractor_bank_size: int
    distractor_types: tuple[str, ...]
    distractor_min_evidence_chars: int
    distractor_max_evidence_chars: int
    offset_namespace: str
    fact_order: str


class HybridSettings(NamedTuple):
    """The ``hybrid-v1`` parameters the protocol runs the production selector with."""

    confidence_weight: float
    confirmation_weight: float
    access_weight: float
    confirmation_half_life_days: int
    access_half_life_days: int
    correction_reserved_fraction: float
    correction_reserved_max: int


class AnswerPromptPin(NamedTuple):
    """The answer prompt file (relative to the config) and its pinned SHA-256."""

    path: str
    sha256: str


class QASettings(NamedTuple):
    """The question-answering run: model, request parameters, grader version.

    Only the *names* of the environment variables holding the endpoint and
    the key are part of the protocol, never their values.
    """

    answer_prompt: AnswerPromptPin
    grader_version: str
    provider: str
    api_key_env: str
    base_url_env: str
    model: str
    temperature: float
    max_tokens: int
    stream: bool
    timeout_seconds: int
    max_attempts: int
    workers: int


class StatisticsSettings(NamedTuple):
    """The paired statistics: bootstrap seed, iterations and the two-sided alpha."""

    bootstrap_seed: int
    bootstrap_iterations: int
    alpha: float


class EvaluationConfig(NamedTuple):
    """A parsed protocol configuration.

    Attributes:
        required_policy_version: the ``hybrid-v1`` version the protocol was
            designed for; checked against the production constant when the
            protocol is loaded.
        evaluation_time: the fixed clock of every decision, aware and in UTC.
        confidence_policy: the policy name of the baseline (``"confidence"``).
        hybrid: the ``hybrid-v1`` parameters.
    """

    schema_version: int
    protocol_id: str
    required_policy_version: str
    evaluation_time: datetime
    dataset: DatasetPin
    pool: PoolSettings
    confidence_policy: str
    hybrid_policy: str
    hybrid: HybridSettings
    qa: QASettings
    statistics: StatisticsSettings


_TOP_KEYS: Final = (
    "schema_version",
    "protocol_id",
    "required_policy_version",
    "evaluation_time",
    "dataset",
    "pool",
    "policies",
    "qa",
    "statistics",
)


def parse_config(data: object, *, file: str) -> EvaluationConfig:
    """Validate a loaded config document.

    Raises:
        ProtocolError: the first problem found, naming ``file`` and the key.
    """
    top = Section(data, file=file, key=None, fields=_TOP_KEYS)
    top.literal("schema_version", 1)
    policies = top.section("policies", ("confidence", "hybrid_v1"))
    confidence = policies.section("confidence", ("policy",))
    confidence.literal("policy", "confidence")
    hybrid = policies.section(
        "hybrid_v1",
        (
            "policy",
            "weights",
            "confirmation_half_life_days",
            "access_half_life_days",
            "correction_reserved_fraction",
            "correction_reserved_max",
        ),
    )
    hybrid.literal("policy", "hybrid-v1")
    return EvaluationConfig(
        schema_version=1,
        protocol_id=top.text("protocol_id"),
        required_policy_version=top.text("required_policy_version"),
        evaluation_time=_evaluation_time(top),
        dataset=_dataset(top.section("dataset", ("repository", "revision", "filename", "sha256"))),
        pool=_pool(top),
        confidence_policy="confidence",
        hybrid_policy="hybrid-v1",
        hybrid=_hybrid(hybrid),
        qa=_qa(top),
        statistics=_statistics(top),
    )


def _evaluation_time(top: Section) -> datetime:
    value = top.raw("evaluation_time")
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise top.error(
                "evaluation_time", f"must be an ISO 8601 timestamp, got {describe(value)}"
            ) from None
    elif isinstance(value, datetime):  # an unquoted timestamp in YAML
        moment = value
    else:
        raise top.error("evaluation_time", f"must be a timestamp, got {describe(value)}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise top.error("evaluation_time", f"must include a time zone, got {describe(value)}")
    return moment.astimezone(UTC)


def _dataset(section: Section) -> DatasetPin:
    return DatasetPin(
        repository=section.text("repository"),
        revision=section.text("revision", pattern=HEX_40, meaning="40 lowercase hex digits"),
        filename=section.text("filename"),
        sha256=section.text("sha256", pattern=HEX_64, meaning="64 lowercase hex digits"),
    )


def _pool(top: Section) -> PoolSettings:
    pool = top.section(
        "pool",
        (
            "size",
            "capacities",
            "qa_capacity",
            "distractors",
            "distractor_bank_size",
            "distractor_types",
            "distractor_min_evidence_chars",
            "distractor_max_evidence_chars",
            "offset_namespace",
            "fact_order",
        ),
    )
    size = pool.integer("size", minimum=2)
    capacities = pool.integer_list("capacities", minimum=1, maximum=size - 1, unique=True)
    qa_capacity = pool.integer("qa_capacity")
    if qa_capacity not in capacities:
        raise pool.error(
            "qa_capacity", f"must be one of pool.capacities {list(capacities)}, got {qa_capacity}"
        )
    distractors = pool.integer("distractors")
    if distractors != size - 1:
        raise pool.error("distractors", f"must equal pool.size - 1 = {size - 1}, got {distractors}")
    bank_size = pool.integer("distractor_bank_size")
    if bank_size < distractors:
        raise pool.error(
            "distractor_bank_size",
            f"must be at least pool.distractors = {distractors}, got {bank_size}",
        )
    low = pool.integer("distractor_min_evidence_chars", minimum=0)
    high = pool.integer("distractor_max_evidence_chars", minimum=0)
    if low > high:
        raise pool.error(
            "distractor_max_evidence_chars",
            f"must be at least distractor_min_evidence_chars = {low}, got {high}",
        )
    pool.literal("fact_order", "fact-id")
    return PoolSettings(
        size=size,
        capacities=capacities,
        qa_capacity=qa_capacity,
        distractors=distractors,
        distractor_bank_size=bank_size,
        distractor_types=pool.text_list("distractor_types"),
        distractor_min_evidence_chars=low,
        distractor_max_evidence_chars=high,
        offset_namespace=pool.text("offset_namespace"),
        fact_order="fact-id",
    )


def _hybrid(section: Section) -> HybridSettings:
    weights = section.section("weights", _WEIGHT_KEYS)
    values = [weights.number(name, minimum=0.0, maximum=1.0) for name in _WEIGHT_KEYS]
    total = values[0] + values[1] + values[2]
    if abs(total - 1.0) > WEIGHT_TOLERANCE:
        raise section.error(
            "weights",
            f"must sum to 1 (within {WEIGHT_TOLERANCE}); "
            f"confidence {values[0]!r} + confirmation {values[1]!r} + access {values[2]!r} "
            f"= {total!r}",
        )
    return HybridSettings(
        confidence_weight=values[0],
        confirmation_weight=values[1],
        access_weight=values[2],
        confirmation_half_life_days=section.integer("confirmation_half_life_days", minimum=1),
        access_half_life_days=section.integer("access_half_life_days", minimum=1),
        correction_reserved_fraction=section.number(
            "correction_reserved_fraction", minimum=0.0, maximum=1.0
        ),
        correction_reserved_max=section.integer("correction_reserved_max", minimum=0),
    )


def _qa(top: Section) -> QASettings:
    qa = top.section(
        "qa",
        (
            "answer_prompt",
            "grader_version",
            "provider",
            "api_key_env",
            "base_url_env",
            "model",
            "temperature",
            "max_tokens",
            "stream",
            "timeout_seconds",
            "max_attempts",
            "workers",
        ),
    )
    prompt = qa.section("answer_prompt", ("path", "sha256"))
    qa.literal("provider", PROVIDER_OPENAI_COMPATIBLE)
    if qa.boolean("stream"):
        raise qa.error(
            "stream", "must be false: the answer run reads each answer whole, not streamed"
        )
    return QASettings(
        answer_prompt=AnswerPromptPin(
            path=prompt.text("path"),
            sha256=prompt.text("sha256", pattern=HEX_64, meaning="64 lowercase hex digits"),
        ),
        grader_version=qa.text("grader_version"),
        provider=PROVIDER_OPENAI_COMPATIBLE,
        api_key_env=qa.text("api_key_env"),
        base_url_env=qa.text("base_url_env"),
        model=qa.text("model"),
        temperature=qa.number("temperature", minimum=0.0),
        max_tokens=qa.integer("max_tokens", minimum=1),
        stream=False,
        timeout_seconds=qa.integer("timeout_seconds", minimum=1),
        max_attempts=qa.integer("max_attempts", minimum=1),
        workers=qa.integer("workers", minimum=1),
    )


def _statistics(top: Section) -> StatisticsSettings:
    stats = top.section("statistics", ("bootstrap_seed", "bootstrap_iterations", "alpha"))
    return StatisticsSettings(
        bootstrap_seed=stats.integer("bootstrap_seed"),
        bootstrap_iterations=stats.integer("bootstrap_iterations", minimum=1),
        alpha=stats.number("alpha", minimum=0.0, maximum=1.0, exclusive=True),
    )


# --- eval/protocol/manifests.py -------------------------------------------------------------------

SCENARIO_CONFIRMATION_HELP: Final = "confirmation_help"
SCENARIO_ACCESS_HELP: Final = "access_help"
SCENARIO_CONFIDENCE_CONTROL: Final = "confidence_control"
SCENARIO_NOISY_SIGNAL_CONTROL: Final = "noisy_signal_control"
SCENARIO_CORRECTION_RESERVE: Final = "correction_reserve"
# The registered official scenarios (each has its metadata rule in cases.py).
OFFICIAL_SCENARIOS: Final = (
    SCENARIO_CONFIRMATION_HELP,
    SCENARIO_ACCESS_HELP,
    SCENARIO_CONFIDENCE_CONTROL,
    SCENARIO_NOISY_SIGNAL_CONTROL,
)
ELIGIBLE_QUESTION_TYPES: Final = ("knowledge-update", "temporal-reasoning")
# Case ids become parts of fact ids and, later, of file names: keep them plain.
CASE_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
CASES_PER_SCENARIO: Final = 10
SYNTHETIC_CASES: Final = 5
MAX_LOSS_RANK: Final = 10


def scenario_rank(scenario: str) -> tuple[int, str]:
    """Where a scenario sorts in tables: registered ones in protocol order, others after by name."""
    if scenario in OFFICIAL_SCENARIOS:
        return (OFFICIAL_SCENARIOS.index(scenario), "")
    return (len(OFFICIAL_SCENARIOS), scenario)


class SelectionRule(NamedTuple):
    """How the 40 official questions are picked from the dataset (§3.2)."""

    eligible_question_types: tuple[str, ...]
    excluded_pilot_ids: tuple[str, ...]
    exclude_abstention_suffix: str
    answer_min_chars: int
    answer_max_chars: int
    answer_excluded_substrings: tuple[str, ...]
    evidence_min_chars: int
    evidence_max_chars: int
    take_per_question_type: int
    cases_per_type_per_scenario: int


class OfficialManifest(NamedTuple):
    """The pinned LongMemEval questions, grouped by scenario.

    Attributes:
        scenario_order: the order cases are built and reported in.
        loss_ranks: the support fact's rank among the ten facts of a pool, by
            position within a scenario (after sorting its ids by type, id).
        scenarios: scenario → its ten question ids, as pinned.
    """

    schema_version: int
    protocol_id: str
    selection: SelectionRule
    scenario_order: tuple[str, ...]
    loss_ranks: tuple[int, ...]
    scenarios: Mapping[str, tuple[str, ...]]

    @property
    def question_ids(self) -> tuple[str, ...]:
        """Every pinned id, scenario by scenario in ``scenario_order``."""
        return tuple(qid for name in self.scenario_order for qid in self.scenarios[name])


class SyntheticCase(NamedTuple):
    """One correction case: the support fact, the question, the expected answer."""

    case_id: str
    support_fact: str
    question: str
    answer: str
    loss_rank: int


class SyntheticManifest(NamedTuple):
    """The five correction cases of the ``correction_reserve`` scenario."""

    schema_version: int
    protocol_id: str
    scenario: str
    cases: tuple[SyntheticCase, ...]


_SELECTION_KEYS: Final = (
    "eligible_question_types",
    "excluded_pilot_ids",
    "exclude_abstention_suffix",
    "answer_min_chars",
    "answer_max_chars",
    "answer_excluded_substrings",
    "evidence_min_chars",
    "evidence_max_chars",
    "take_per_question_type",
    "cases_per_type_per_scenario",
)


def parse_official_manifest(data: object, *, file: str) -> OfficialManifest:
    """Validate a loaded official manifest.

    Raises:
        ProtocolError: the first problem found, naming ``file`` and the key.
    """
    top = Section(
        data,
        file=file,
        key=None,
        fields=(
            "schema_version",
            "protocol_id",
            "selection",
            "scenario_order",
            "loss_ranks",
            "scenarios",
        ),
    )
    top.literal("schema_version", 1)
    order = top.text_list("scenario_order")
    if sorted(order) != sorted(OFFICIAL_SCENARIOS):
        raise top.error(
            "scenario_order",
            f"must list each registered scenario exactly once ({', '.join(OFFICIAL_SCENARIOS)}),"
            f" got {list(order)}",
        )
    loss_ranks = top.integer_list("loss_ranks", minimum=1, maximum=MAX_LOSS_RANK, unique=False)
    if len(loss_ranks) != CASES_PER_SCENARIO:
        raise top.error(
            "loss_ranks",
            f"must hold {CASES_PER_SCENARIO} values (one per case of a scenario), "
            f"got {len(loss_ranks)}",
        )
    selection = _selection(top.section("selection", _SELECTION_KEYS))
    _check_grouping(top, selection)
    return OfficialManifest(
        schema_version=1,
        protocol_id=top.text("protocol_id"),
        selection=selection,
        scenario_order=order,
        loss_ranks=loss_ranks,
        scenarios=_scenarios(top),
    )


def _check_grouping(top: Section, rule: SelectionRule) -> None:
    """The rule must pick exactly what the scenarios hold: 4 × 5 per type, 2 × 5 per scenario."""
    wanted = len(OFFICIAL_SCENARIOS) * rule.cases_per_type_per_scenario
    if rule.take_per_question_type != wanted:
        raise top.error(
            "selection.take_per_question_type",
            f"must equal {len(OFFICIAL_SCENARIOS)} scenarios x cases_per_type_per_scenario "
            f"{rule.cases_per_type_per_scenario} = {wanted}, got {rule.take_per_question_type}",
        )
    per_scenario = len(rule.eligible_question_types) * rule.cases_per_type_per_scenario
    if per_scenario != CASES_PER_SCENARIO:
        raise top.error(
            "selection.cases_per_type_per_scenario",
            f"{len(rule.eligible_question_types)} question types x "
            f"{rule.cases_per_type_per_scenario} cases must give the {CASES_PER_SCENARIO} "
            f"cases of a scenario, got {per_scenario}",
        )


def _selection(section: Section) -> SelectionRule:
    types = section.text_list("eligible_question_types")
    for position, name in enumerate(types):
        if name not in ELIGIBLE_QUESTION_TYPES:
            raise ProtocolError(
                section.file,
                f"{section.path('eligible_question_types')}[{position}]",
                f"must be one of {', '.join(ELIGIBLE_QUESTION_TYPES)}, got {describe(name)}",
            )
    answer_min = section.integer("answer_min_chars", minimum=0)
    answer_max = section.integer("answer_max_chars", minimum=answer_min)
    evidence_min = section.integer("evidence_min_chars", minimum=0)
    evidence_max = section.integer("evidence_max_chars", minimum=evidence_min)
    return SelectionRule(
        eligible_question_types=types,
        excluded_pilot_ids=section.text_list("excluded_pilot_ids", non_empty=False),
        exclude_abstention_suffix=section.text("exclude_abstention_suffix"),
        answer_min_chars=answer_min,
        answer_max_chars=answer_max,
        answer_excluded_substrings=section.text_list("answer_excluded_substrings", non_empty=False),
        evidence_min_chars=evidence_min,
        evidence_max_chars=evidence_max,
        take_per_question_type=section.integer("take_per_question_type", minimum=1),
        cases_per_type_per_scenario=section.integer("cases_per_type_per_scenario", minimum=1),
    )


def _scenarios(top: Section) -> dict[str, tuple[str, ...]]:
    section = top.section("scenarios", OFFICIAL_SCENARIOS)
    scenarios: dict[str, tuple[str, ...]] = {}
    seen: dict[str, str] = {}
    for name in OFFICIAL_SCENARIOS:
        ids = section.text_list(name)
        if len(ids) != CASES_PER_SCENARIO:
            raise section.error(
                name, f"must hold {CASES_PER_SCENARIO} question ids, got {len(ids)}"
            )
        for position, qid in enumerate(ids):
            key = f"{section.path(name)}[{position}]"
            if not CASE_ID_PATTERN.fullmatch(qid):
                raise ProtocolError(top.file, key, f"is not a plain identifier: {describe(qid)}")
            if qid in seen:
                raise ProtocolError(
                    top.file, key, f"question id {qid!r} is already pinned under {seen[qid]!r}"
                )
            seen[qid] = name
        scenarios[name] = ids
    return scenarios


def parse_synthetic_manifest(data: object, *, file: str) -> SyntheticManifest:
    """Validate a loaded synthetic manifest.

    Raises:
        ProtocolError: the first problem found, naming ``file`` and the key.
    """
    top = Section(
        data, file=file, key=None, fields=("schema_version", "protocol_id", "scenario", "cases")
    )
    top.literal("schema_version", 1)
    top.literal("scenario", SCENARIO_CORRECTION_RESERVE)
    raw_cases = top.raw("cases")
    if not isinstance(raw_cases, list) or len(raw_cases) != SYNTHETIC_CASES:
        count = len(raw_cases) if isinstance(raw_cases, list) else describe(raw_cases)
        raise top.error("cases", f"must be a list of {SYNTHETIC_CASES} cases, got {count}")
    cases: list[SyntheticCase] = []
    for position, raw in enumerate(raw_cases):
        case = Section(
            raw,
            file=file,
            key=f"cases[{position}]",
            fields=("case_id", "support_fact", "question", "answer", "loss_rank"),
        )
        case_id = case.text(
            "case_id", pattern=CASE_ID_PATTERN, meaning="a plain identifier ([A-Za-z0-9_.-])"
        )
        if any(known.case_id == case_id for known in cases):
            raise case.error("case_id", f"repeats the case id {case_id!r}")
        cases.append(
            SyntheticCase(
                case_id=case_id,
                support_fact=case.text("support_fact"),
                question=case.text("question"),
                answer=case.text("answer"),
                loss_rank=case.integer("loss_rank", minimum=1, maximum=MAX_LOSS_RANK),
            )
        )
    return SyntheticManifest(
        schema_version=1,
        protocol_id=top.text("protocol_id"),
        scenario=SCENARIO_CORRECTION_RESERVE,
        cases=tuple(cases),
    )


# --- eval/protocol/prompt.py ----------------------------------------------------------------------

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


# --- eval/protocol/bundle.py ----------------------------------------------------------------------

BUNDLE_DIRECTORY: Final = Path(__file__).parent / "bundled"


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

    def to_dict(self) -> dict[str, str]:
        return {
            "answer_prompt_sha256": self.answer_prompt_sha256,
            "config_sha256": self.config_sha256,
            "official_manifest_sha256": self.official_manifest_sha256,
            "synthetic_manifest_sha256": self.synthetic_manifest_sha256,
        }


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
    config = parse_config(_parse_yaml(files.config, config_bytes), file=str(files.config))
    official = parse_official_manifest(
        _parse_json(files.official_manifest, official_bytes), file=str(files.official_manifest)
    )
    synthetic = parse_synthetic_manifest(
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
    template = AnswerTemplate.parse(_decode(prompt_path, prompt_bytes), file=str(prompt_path))
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
    return parse_config(_parse_yaml(path, _read(path)), file=str(path))


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
        return path.read_bytes()
    except OSError as error:
        raise ProtocolError(
            str(path), None, f"cannot read the file: {error.strerror or error}"
        ) from None


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ProtocolError(str(path), None, f"is not UTF-8 text (byte {error.start})") from None


def _parse_yaml(path: Path, data: bytes) -> object:
    try:
        return load_yaml(_decode(path, data))
    except YAMLSyntaxError as error:
        raise ProtocolError(str(path), None, f"is not valid YAML: {error}") from None
    except RepeatedKeyError as error:
        raise ProtocolError(str(path), error.key, str(error)) from None


def _parse_json(path: Path, data: bytes) -> object:
    try:
        return json.loads(_decode(path, data))
    except json.JSONDecodeError as error:
        raise ProtocolError(
            str(path),
            None,
            f"is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}",
        ) from None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
