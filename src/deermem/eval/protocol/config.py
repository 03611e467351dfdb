"""The protocol configuration: what is pinned, and the parameters of every run.

The schema is the original harness's (reference ``eval-harness-spec.md``
§2.1), key for key, so its own ``pr4789-reproduction-v1.yaml`` loads here
unchanged. Values are read strictly (:mod:`deermem.eval.protocol._checks`):
unknown or missing keys, wrong types and out-of-range values are errors that
name the file and the dotted key.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final, NamedTuple

from deermem.eval.protocol._checks import HEX_40, HEX_64, Section, describe

__all__ = [
    "PROVIDER_LOCAL",
    "PROVIDER_OPENAI_COMPATIBLE",
    "AnswerPromptPin",
    "DatasetPin",
    "EvaluationConfig",
    "HybridSettings",
    "PoolSettings",
    "QASettings",
    "StatisticsSettings",
    "parse_config",
]

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
