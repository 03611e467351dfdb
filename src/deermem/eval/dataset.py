"""The dataset and the 45 cases built from it: checked by hash, selected, pooled.

**The file.** The LongMemEval oracle file is the one input that is not ours
to ship. A run therefore accepts exactly one file — the one whose SHA-256 the
protocol pins — and checks that hash on the raw bytes *before* parsing
anything, so a different revision can neither be misread nor slip through with
a plausible result. deermem never downloads it (docs/evaluation.md says where
to get it). Evidence rendering (reference ``eval-harness-spec.md`` §3.1) turns
a question's haystack into the text of a fact; its exact characters matter,
since the selection rule and the distractor bank filter on their length.

**The selection.** Which questions a protocol uses is recomputed from the
dataset on every run instead of being trusted from a file. The official
selection (§3.2) must reproduce the manifest's pinned ids exactly, order
included; the distractor bank (§3.3) is the first 40 single-session records,
by id, whose evidence has a usable length.

**The cases.** Each case puts one *support* fact (the evidence that answers
its question) among nine *distractors* drawn from the bank, and gives every
fact the confidence, timestamps and usage its scenario prescribes (§3.4).
Which facts survive a cap depends on this metadata only, never on the text,
so the retention figures are fixed by the protocol; the text matters for the
QA run. Two details carry the published results and are kept exactly:

* the metadata numbers are Python float expressions evaluated in the
  original's operation order (``0.94 - 0.02 * i`` is 0.9199999999999999 at
  i = 1), so near-ties break identically;
* facts are sorted by id before selection, and the selector breaks ties by
  input position, so ``d_<case>_<i>_…`` distractors outrank a tied
  ``gold_<case>`` support fact.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO, Final, NamedTuple

from deermem.eval.errors import DatasetHashMismatchError, DatasetIntegrityError, ProtocolError
from deermem.eval.files import IDENTIFIER, IDENTIFIER_RULE, describe_value
from deermem.eval.protocol import (
    SCENARIO_ACCESS_HELP,
    SCENARIO_CONFIDENCE_CONTROL,
    SCENARIO_CONFIRMATION_HELP,
    SCENARIO_CORRECTION_RESERVE,
    SCENARIO_NOISY_SIGNAL_CONTROL,
    OfficialManifest,
    PoolSettings,
    Protocol,
    SelectionRule,
)
from deermem.eval.rows import SOURCE_LONGMEMEVAL, SOURCE_SYNTHETIC
from deermem.model import format_timestamp
from deermem.store.markdown.files import NotRegularFileError, open_regular_file

__all__ = [
    "build_cases",
    "load_dataset",
]

# --- the dataset file -----------------------------------------------------------------------------

_CHUNK: Final = 1 << 20


class EvidenceRecord(NamedTuple):
    """One dataset question, with its haystack rendered to the text of a fact.

    Attributes:
        answer: the reference answer as a string (non-strings JSON-encoded).
        question_date: the question's date line, or ``None``.
        content: the rendered evidence (may be empty when no turn qualifies).
    """

    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: str | None
    content: str


class Dataset:
    """The parsed dataset: rows in file order, indexed by question id.

    Evidence is rendered on demand and remembered, because a run needs it for
    the ~150 candidate rows only, not for every row of the file.
    """

    __slots__ = ("_by_id", "_evidence", "path", "rows", "sha256")

    def __init__(self, path: str, sha256: str, rows: list[dict[str, Any]]) -> None:
        self.path = path
        self.sha256 = sha256
        self.rows: tuple[dict[str, Any], ...] = tuple(rows)
        self._by_id: dict[str, dict[str, Any]] = {}
        for position, row in enumerate(self.rows):
            question_id = row.get("question_id")
            if not isinstance(question_id, str) or not question_id:
                raise DatasetIntegrityError(
                    path, f"row {position} has no question_id (a non-empty string is required)"
                )
            if question_id in self._by_id:
                raise DatasetIntegrityError(path, f"question_id {question_id!r} appears twice")
            self._by_id[question_id] = row
        self._evidence: dict[str, EvidenceRecord] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def __contains__(self, question_id: object) -> bool:
        return question_id in self._by_id

    def row(self, question_id: str) -> Mapping[str, Any]:
        """The raw row of ``question_id``.

        Raises:
            DatasetIntegrityError: no such question in the file.
        """
        try:
            return self._by_id[question_id]
        except KeyError:
            raise DatasetIntegrityError(self.path, f"has no question {question_id!r}") from None

    def evidence(self, question_id: str) -> EvidenceRecord:
        """The question's identity fields and rendered evidence.

        Raises:
            DatasetIntegrityError: the row lacks its identity fields, has a bad
                ``question_date``, or malformed haystack arrays.
        """
        record = self._evidence.get(question_id)
        if record is None:
            record = self._evidence[question_id] = _evidence_record(
                self.row(question_id), self.path
            )
        return record


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's raw bytes, read in 1 MiB chunks.

    Raises:
        OSError: ``path`` cannot be read or is not a regular file
            (:func:`~deermem.store.markdown.files.open_regular_file`).
    """
    with open_regular_file(path) as stream:
        return _stream_sha256(stream)


def _stream_sha256(stream: BinaryIO) -> str:
    digest = hashlib.sha256()
    while chunk := stream.read(_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def load_dataset(path: Path, *, expected_sha256: str) -> Dataset:
    """Read the dataset, refusing any file but the pinned one.

    The file is hashed in chunks before a byte of it is held in memory, so
    a wrong file of any size (LongMemEval's other variants are gigabytes) is
    refused in constant memory, with both hashes, and nothing of it is
    interpreted; only the pinned file is read whole and parsed. Anything but
    a regular file (a device such as ``/dev/zero``, a pipe, a directory) is
    refused before it is opened: it has no fixed bytes to pin.

    Raises:
        DatasetHashMismatchError: the SHA-256 differs from ``expected_sha256``.
        DatasetIntegrityError: the file cannot be read, is not a regular
            file, is not JSON, or its rows break the expected shape.
    """
    shown = str(path)
    try:
        with open_regular_file(path) as stream:
            actual = _stream_sha256(stream)
            if actual != expected_sha256:
                raise DatasetHashMismatchError(shown, expected=expected_sha256, actual=actual)
            stream.seek(0)
            data = stream.read()
    except (NotRegularFileError, IsADirectoryError):
        raise DatasetIntegrityError(
            shown, "is not a regular file (the dataset is a JSON file)"
        ) from None
    except OSError as error:
        raise DatasetIntegrityError(
            shown,
            f"cannot read the dataset: {error.strerror or error} "
            "(deermem never downloads it; see docs/evaluation.md)",
        ) from None
    if hashlib.sha256(data).hexdigest() != actual:  # it changed since it was hashed
        raise DatasetIntegrityError(shown, "changed while it was read; run again")
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as error:  # JSONDecodeError and bad encodings
        raise DatasetIntegrityError(shown, f"is not valid JSON: {error}") from None
    if not isinstance(document, list) or not all(isinstance(row, dict) for row in document):
        raise DatasetIntegrityError(shown, "the top level must be a list of question objects")
    return Dataset(shown, actual, document)


def answer_text(value: object) -> str:
    """The reference answer as text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def render_evidence(row: Mapping[str, Any], *, path: str = "<dataset>") -> str:
    """Render a question's haystack as the text of a fact.

    Each session becomes a ``SESSION <id> AT <date>`` line followed by one
    ``ROLE: content`` line per selected turn: the turns marked
    ``has_answer: true``, or, when a session marks none, its user turns; a
    session with neither is left out. Sessions are separated by a blank line.

    Raises:
        DatasetIntegrityError: the three haystack arrays are not lists of the
            same length, or a session is not a list of turns.
    """
    session_ids = row.get("haystack_session_ids")
    dates = row.get("haystack_dates")
    sessions = row.get("haystack_sessions")
    question_id = row.get("question_id")
    if not (
        isinstance(session_ids, list) and isinstance(dates, list) and isinstance(sessions, list)
    ):
        raise DatasetIntegrityError(
            path,
            f"question {question_id!r}: haystack_session_ids, haystack_dates and "
            "haystack_sessions must be lists",
        )
    if not len(session_ids) == len(dates) == len(sessions):
        raise DatasetIntegrityError(
            path,
            f"question {question_id!r}: haystack arrays have different lengths "
            f"({len(session_ids)}, {len(dates)}, {len(sessions)})",
        )
    blocks: list[str] = []
    for position, (session_id, date, session) in enumerate(
        zip(session_ids, dates, sessions, strict=True)
    ):
        if not isinstance(session, list):
            raise DatasetIntegrityError(
                path, f"question {question_id!r}: session {position} is not a list of turns"
            )
        turns = [
            turn
            for turn in session
            if isinstance(turn, dict) and isinstance(turn.get("content"), str)
        ]
        selected = [turn for turn in turns if turn.get("has_answer") is True]
        if not selected:
            selected = [turn for turn in turns if _role(turn).lower() == "user"]
        if selected:
            lines = [f"SESSION {session_id} AT {date}"]
            lines.extend(
                f"{_role(turn).upper() or 'UNKNOWN'}: {turn['content']}" for turn in selected
            )
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _role(turn: Mapping[str, Any]) -> str:
    role = turn.get("role")
    return role if isinstance(role, str) else ""


def _evidence_record(row: Mapping[str, Any], path: str) -> EvidenceRecord:
    question_id = row.get("question_id")
    question_type = row.get("question_type")
    question = row.get("question")
    if not all(
        isinstance(value, str) and value for value in (question_id, question_type, question)
    ):
        raise DatasetIntegrityError(
            path,
            f"question {question_id!r}: question_id, question_type and question must be "
            "non-empty strings",
        )
    question_date = row.get("question_date")
    if question_date is not None and not isinstance(question_date, str):
        raise DatasetIntegrityError(
            path, f"question {question_id!r}: question_date must be a string or null"
        )
    return EvidenceRecord(
        question_id=str(question_id),
        question_type=str(question_type),
        question=str(question),
        answer=answer_text(row.get("answer")),
        question_date=question_date,
        content=render_evidence(row, path=path),
    )


# --- the selection and the distractor bank --------------------------------------------------------


class BankEntry(NamedTuple):
    """A distractor source: its evidence record, at its position in the bank."""

    position: int
    record: EvidenceRecord


def select_by_type(dataset: Dataset, rule: SelectionRule) -> dict[str, tuple[str, ...]]:
    """Apply the selection rule: per eligible type, the first ids in id order.

    A row qualifies when its type is eligible; its id is neither a pilot id
    nor an abstention (``_abs``) id; its stripped answer has an allowed
    length and none of the excluded phrases (compared lower-cased); and its
    rendered evidence has an allowed length.

    Raises:
        DatasetIntegrityError: a type has fewer qualifying rows than the rule
            takes, or a candidate row is malformed.
    """
    eligible = set(rule.eligible_question_types)
    pilots = set(rule.excluded_pilot_ids)
    phrases = [phrase.lower() for phrase in rule.answer_excluded_substrings]
    found: dict[str, list[str]] = {name: [] for name in rule.eligible_question_types}
    for row in dataset.rows:
        question_type = row.get("question_type")
        question_id = row["question_id"]
        if not isinstance(question_type, str) or question_type not in eligible:
            continue
        if question_id in pilots or question_id.endswith(rule.exclude_abstention_suffix):
            continue
        record = dataset.evidence(question_id)
        answer = record.answer.strip()
        if not rule.answer_min_chars <= len(answer) <= rule.answer_max_chars:
            continue
        lowered = answer.lower()
        if any(phrase in lowered for phrase in phrases):
            continue
        if not rule.evidence_min_chars <= len(record.content) <= rule.evidence_max_chars:
            continue
        found[record.question_type].append(question_id)
    selected: dict[str, tuple[str, ...]] = {}
    for name, ids in found.items():
        if len(ids) < rule.take_per_question_type:
            raise DatasetIntegrityError(
                dataset.path,
                f"only {len(ids)} {name!r} questions pass the selection rule; "
                f"the protocol takes {rule.take_per_question_type}",
            )
        selected[name] = tuple(sorted(ids)[: rule.take_per_question_type])
    return selected


def expected_scenarios(
    manifest: OfficialManifest, by_type: dict[str, tuple[str, ...]]
) -> dict[str, tuple[str, ...]]:
    """Deal the selected ids to the scenarios: scenario i gets slice i of each type."""
    size = manifest.selection.cases_per_type_per_scenario
    return {
        scenario: tuple(
            qid
            for question_type in manifest.selection.eligible_question_types
            for qid in by_type[question_type][index * size : (index + 1) * size]
        )
        for index, scenario in enumerate(manifest.scenario_order)
    }


def check_official_selection(dataset: Dataset, manifest: OfficialManifest, *, file: str) -> None:
    """Recompute the selection and require the manifest to pin exactly its result.

    Raises:
        ProtocolError: a scenario's pinned ids differ from the recomputed ones
            (order included); the error names the manifest file and key.
        DatasetIntegrityError: too few qualifying rows, or malformed rows.
    """
    expected = expected_scenarios(manifest, select_by_type(dataset, manifest.selection))
    for scenario in manifest.scenario_order:
        pinned = manifest.scenarios[scenario]
        if pinned != expected[scenario]:
            raise ProtocolError(
                file,
                f"scenarios.{scenario}",
                "does not match the selection rule applied to the dataset: the rule picks "
                f"{list(expected[scenario])}, the manifest pins {list(pinned)}",
            )


def build_distractor_bank(dataset: Dataset, pool: PoolSettings) -> tuple[BankEntry, ...]:
    """The first ``distractor_bank_size`` qualifying single-session records, by id.

    No pilot or abstention exclusion applies here: the bank draws from other
    question types than the official cases.

    Raises:
        DatasetIntegrityError: fewer qualifying records than the bank size.
    """
    types = set(pool.distractor_types)
    qualifying: list[EvidenceRecord] = []
    for row in dataset.rows:
        question_type = row.get("question_type")
        if not isinstance(question_type, str) or question_type not in types:
            continue
        record = dataset.evidence(row["question_id"])
        if (
            pool.distractor_min_evidence_chars
            <= len(record.content)
            <= pool.distractor_max_evidence_chars
        ):
            qualifying.append(record)
    qualifying.sort(key=lambda record: record.question_id)
    if len(qualifying) < pool.distractor_bank_size:
        raise DatasetIntegrityError(
            dataset.path,
            f"only {len(qualifying)} records qualify for the distractor bank; "
            f"the protocol needs {pool.distractor_bank_size}",
        )
    bank = qualifying[: pool.distractor_bank_size]
    for record in bank:
        # Source ids become parts of fact ids, which stored answers and graded rows
        # must hold as plain identifiers: refuse here, before a run writes or calls.
        if not IDENTIFIER.fullmatch(record.question_id):
            raise DatasetIntegrityError(
                dataset.path,
                f"question_id {describe_value(record.question_id)} of a distractor-bank record "
                f"is not a plain identifier ({IDENTIFIER_RULE}); it becomes part of fact ids",
            )
    return tuple(BankEntry(position, record) for position, record in enumerate(bank))


# --- the cases ------------------------------------------------------------------------------------

SYNTHETIC_QUESTION_TYPE: Final = "synthetic-correction"
FACT_SOURCE_PREFIX: Final = "deermem-eviction-eval:"
PREFERENCE_SOURCE_TYPE: Final = "single-session-preference"
HEAT: Final = 8  # access heat of a "hot" fact: saturates the heat signal (log1p(8) = log 9)


class FactMetadata(NamedTuple):
    """What a scenario prescribes for one fact of a pool.

    Attributes:
        created_days: days before the evaluation clock the fact was created.
        confirmed_days: days since the user last confirmed it, or ``None``.
        access_heat: usage-sidecar heat, accessed at the clock; 0 = no entry.
        category: a fixed category, or ``None`` to take it from the source's
            question type (``preference`` or ``context``).
    """

    confidence: float
    created_days: int
    confirmed_days: int | None = None
    access_heat: int = 0
    category: str | None = None


class EvaluationCase(NamedTuple):
    """One case: its question and its pool of ten facts, ready for the selector.

    Attributes:
        source: ``longmemeval`` or ``synthetic``.
        offset: where the case's nine distractors start in the bank.
        facts: fact dicts with canonical keys, sorted by id. Treat as read-only.
        usage: the usage sidecar (fact id → entry) for the facts with heat.
        support_fact_ids: the facts that answer the question (``gold_<case>``).
    """

    case_id: str
    source: str
    scenario: str
    question_type: str
    question: str
    answer: str
    question_date: str | None
    loss_rank: int
    offset: int
    facts: tuple[dict[str, object], ...]
    usage: Mapping[str, Mapping[str, object]]
    support_fact_ids: tuple[str, ...]

    @property
    def outranking_count(self) -> int:
        """How many distractors are built to outrank the support fact."""
        return self.loss_rank - 1


def case_offset(namespace: str, case_id: str, bank_size: int) -> int:
    """Where a case's distractors start: the first 4 bytes of SHA-256, big-endian, mod bank size."""
    digest = hashlib.sha256(f"{namespace}:{case_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % bank_size


def support_metadata(scenario: str) -> FactMetadata:
    """The support fact's metadata in ``scenario``.

    Raises:
        ValueError: an unregistered scenario.
    """
    if scenario == SCENARIO_CONFIRMATION_HELP:
        return FactMetadata(0.70, created_days=180, confirmed_days=7, category="context")
    if scenario == SCENARIO_ACCESS_HELP:
        return FactMetadata(0.70, created_days=180, access_heat=HEAT, category="context")
    if scenario == SCENARIO_CONFIDENCE_CONTROL:
        return FactMetadata(0.95, created_days=30, category="context")
    if scenario == SCENARIO_NOISY_SIGNAL_CONTROL:
        return FactMetadata(0.90, created_days=180, category="context")
    if scenario == SCENARIO_CORRECTION_RESERVE:
        return FactMetadata(0.65, created_days=180, category="correction")
    raise ValueError(f"unknown evaluation scenario {scenario!r}")


def distractor_metadata(scenario: str, index: int, outranking: int) -> FactMetadata:
    """Distractor ``index``'s metadata; the first ``outranking`` ones are built to win.

    Raises:
        ValueError: an unregistered scenario.
    """
    if scenario in (SCENARIO_CONFIRMATION_HELP, SCENARIO_ACCESS_HELP):
        if index < outranking:
            return FactMetadata(0.94 - 0.02 * index, created_days=180)
        return FactMetadata(0.68 - 0.02 * (index - outranking), created_days=180)
    if scenario == SCENARIO_CONFIDENCE_CONTROL:
        if index < 5:
            return FactMetadata(0.94 - 0.02 * index, created_days=180)
        if index % 2:
            return FactMetadata(0.70, created_days=180, confirmed_days=7)
        return FactMetadata(0.70, created_days=180, access_heat=HEAT)
    if scenario == SCENARIO_NOISY_SIGNAL_CONTROL:
        if index >= outranking:
            return FactMetadata(0.70, created_days=180)
        if index % 2:
            return FactMetadata(0.70, created_days=180, confirmed_days=7)
        return FactMetadata(0.70, created_days=180, access_heat=HEAT)
    if scenario == SCENARIO_CORRECTION_RESERVE:
        if index < outranking:
            return FactMetadata(0.90 - 0.03 * index, created_days=180)
        return FactMetadata(0.60 - 0.02 * (index - outranking), created_days=180)
    raise ValueError(f"unknown evaluation scenario {scenario!r}")


def build_cases(protocol: Protocol, dataset: Dataset) -> tuple[EvaluationCase, ...]:
    """Check the official selection, build the bank and the 45 cases, in build order.

    Official cases come first, scenario by scenario in ``scenario_order``,
    each scenario's ids sorted by (question type, id) and given the loss
    ranks in that order; the synthetic cases follow in manifest order.

    Raises:
        ProtocolError: the manifest disagrees with the recomputed selection, or
            a pool would hold the same source record twice.
        DatasetIntegrityError: the dataset cannot supply the cases or the bank.
    """
    official = protocol.official
    check_official_selection(dataset, official, file=str(protocol.files.official_manifest))
    bank = build_distractor_bank(dataset, protocol.config.pool)
    builder = _PoolBuilder(protocol, bank)
    cases: list[EvaluationCase] = []
    for scenario in official.scenario_order:
        records = sorted(
            (dataset.evidence(qid) for qid in official.scenarios[scenario]),
            key=lambda record: (record.question_type, record.question_id),
        )
        for record, loss_rank in zip(records, official.loss_ranks, strict=True):
            cases.append(
                builder.build(
                    case_id=record.question_id,
                    source=SOURCE_LONGMEMEVAL,
                    scenario=scenario,
                    record=record,
                    loss_rank=loss_rank,
                )
            )
    for synthetic in protocol.synthetic.cases:
        record = EvidenceRecord(
            question_id=synthetic.case_id,
            question_type=SYNTHETIC_QUESTION_TYPE,
            question=synthetic.question,
            answer=synthetic.answer,
            question_date=None,
            content=synthetic.support_fact,
        )
        cases.append(
            builder.build(
                case_id=synthetic.case_id,
                source=SOURCE_SYNTHETIC,
                scenario=protocol.synthetic.scenario,
                record=record,
                loss_rank=synthetic.loss_rank,
            )
        )
    return tuple(cases)


class _PoolBuilder:
    """Builds pools for one protocol and bank: ids, metadata, timestamps, usage."""

    def __init__(self, protocol: Protocol, bank: tuple[BankEntry, ...]) -> None:
        self._protocol = protocol
        self._bank = bank
        self._clock: datetime = protocol.config.evaluation_time
        self._stamps: dict[int, str] = {}

    def build(
        self, *, case_id: str, source: str, scenario: str, record: EvidenceRecord, loss_rank: int
    ) -> EvaluationCase:
        pool = self._protocol.config.pool
        offset = case_offset(pool.offset_namespace, case_id, len(self._bank))
        outranking = loss_rank - 1
        support_id = f"gold_{case_id}"
        members = [(support_id, record, support_metadata(scenario))]
        sources = {record.question_id}
        for index in range(pool.distractors):
            entry = self._bank[(offset + index) % len(self._bank)].record
            if entry.question_id in sources:
                raise ProtocolError(
                    str(self._protocol.files.config),
                    "pool.distractor_types",
                    f"the pool of case {case_id!r} would hold question {entry.question_id!r} twice",
                )
            sources.add(entry.question_id)
            members.append(
                (
                    f"d_{case_id}_{index}_{entry.question_id}",
                    entry,
                    distractor_metadata(scenario, index, outranking),
                )
            )
        for fact_id, _, _ in members:
            if not IDENTIFIER.fullmatch(fact_id):  # both parts are plain: only too long
                raise self._too_long(case_id, source, scenario, fact_id)
        members.sort(key=lambda member: member[0])
        now = self._stamp(0)
        usage = {
            fact_id: {
                "accessHeat": meta.access_heat,
                "accessCount": meta.access_heat,
                "lastAccessedAt": now,
            }
            for fact_id, _, meta in members
            if meta.access_heat > 0
        }
        return EvaluationCase(
            case_id=case_id,
            source=source,
            scenario=scenario,
            question_type=record.question_type,
            question=record.question,
            answer=record.answer,
            question_date=record.question_date,
            loss_rank=loss_rank,
            offset=offset,
            facts=tuple(self._fact(*member) for member in members),
            usage=usage,
            support_fact_ids=(support_id,),
        )

    def _too_long(self, case_id: str, source: str, scenario: str, fact_id: str) -> ProtocolError:
        """The error for a case id too long to make fact ids of (it is the manifest's)."""
        files = self._protocol.files
        file, key = (
            (files.synthetic_manifest, "cases")
            if source == SOURCE_SYNTHETIC
            else (files.official_manifest, f"scenarios.{scenario}")
        )
        return ProtocolError(
            str(file),
            key,
            f"case id {case_id!r} is too long: its pool would have a fact id of {len(fact_id)} "
            f"characters ({IDENTIFIER_RULE}); shorten the case id",
        )

    def _fact(
        self, fact_id: str, record: EvidenceRecord, metadata: FactMetadata
    ) -> dict[str, object]:
        category = metadata.category or (
            "preference" if record.question_type == PREFERENCE_SOURCE_TYPE else "context"
        )
        fact: dict[str, object] = {
            "id": fact_id,
            "content": record.content,
            "category": category,
            "confidence": metadata.confidence,
            "createdAt": self._stamp(metadata.created_days),
            "source": f"{FACT_SOURCE_PREFIX}{record.question_id}",
        }
        if metadata.confirmed_days is not None:
            fact["lastConfirmedAt"] = self._stamp(metadata.confirmed_days)
            fact["confirmationCount"] = 1
        return fact

    def _stamp(self, days: int) -> str:
        stamp = self._stamps.get(days)
        if stamp is None:
            stamp = self._stamps[days] = format_timestamp(self._clock - timedelta(days=days))
        return stamp
