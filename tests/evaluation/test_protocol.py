"""The protocol bundle: deermem's own, the original project's, and strict validation."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

import deermem.errors
from deermem.eval import protocol as protocol_module
from deermem.eval.errors import ProtocolError
from deermem.eval.protocol import (
    OFFICIAL_SCENARIOS,
    ProtocolFiles,
    bundled_protocol_files,
    load_protocol,
)
from deermem.policy import POLICIES as POLICY_ORDER
from deermem.policy import POLICY_HYBRID_V1
from tests.evaluation.longmemeval_data import PINNED_SHA256
from tests.evaluation.original_protocol import (
    FIXTURE_ROOT,
    ORIGINAL_HASHES,
    original_prompt_text,
    write_original_bundle,
)

Mutation = Callable[[Any], None]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bundle_copy(directory: Path) -> ProtocolFiles:
    files = bundled_protocol_files()
    shutil.copytree(
        files.config.parent,
        directory,
        ignore=shutil.ignore_patterns("__pycache__"),
        dirs_exist_ok=True,
    )
    return ProtocolFiles(*(directory / path.name for path in files))


def edit_yaml(path: Path, mutate: Mutation) -> None:
    data = yaml.safe_load(path.read_text())
    mutate(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def edit_json(path: Path, mutate: Mutation) -> None:
    data = json.loads(path.read_text())
    mutate(data)
    path.write_text(json.dumps(data, indent=2))


# --- deermem's own bundle --------------------------------------------------------------


def test_bundled_config_pins_the_protocol() -> None:
    protocol = load_protocol()
    config = protocol.config
    assert protocol.protocol_id == "deermem-pr4789-reproduction-v1"
    assert config.dataset.repository == "xiaowu0162/longmemeval-cleaned"
    assert config.dataset.revision == "98d7416c24c778c2fee6e6f3006e7a073259d48f"
    assert config.dataset.filename == "longmemeval_oracle.json"
    assert config.dataset.sha256 == PINNED_SHA256
    assert config.evaluation_time == datetime(2026, 8, 13, tzinfo=UTC)
    pool = config.pool
    assert (pool.size, pool.capacities, pool.qa_capacity) == (10, (5, 7, 9), 7)
    assert (pool.distractors, pool.distractor_bank_size) == (9, 40)
    assert pool.distractor_types == ("single-session-user", "single-session-preference")
    assert (pool.distractor_min_evidence_chars, pool.distractor_max_evidence_chars) == (40, 700)
    assert pool.offset_namespace == "deermem-medium-v1"
    hybrid = config.hybrid
    weights = (hybrid.confidence_weight, hybrid.confirmation_weight, hybrid.access_weight)
    assert weights == (0.65, 0.25, 0.10)
    assert abs(sum(weights) - 1.0) <= 1e-9
    assert (hybrid.confirmation_half_life_days, hybrid.access_half_life_days) == (90, 30)
    assert (hybrid.correction_reserved_fraction, hybrid.correction_reserved_max) == (0.10, 10)
    assert config.required_policy_version == POLICY_HYBRID_V1
    assert config.qa.temperature == 0.0
    assert type(config.qa.temperature) is float
    assert POLICY_ORDER == ("confidence", "hybrid-v1")


def test_bundled_manifests_pin_the_cases() -> None:
    protocol = load_protocol()
    official = protocol.official
    assert official.scenario_order == OFFICIAL_SCENARIOS
    assert official.loss_ranks == (6, 6, 6, 8, 8, 8, 10, 10, 10, 10)
    ids = official.question_ids
    assert len(ids) == len(set(ids)) == 40
    assert official.scenarios["confirmation_help"][:3] == ("01493427", "06db6396", "07741c44")
    assert official.scenarios["noisy_signal_control"][-1] == "af082822"
    for scenario_ids in official.scenarios.values():  # 5 KU then 5 TR, each sorted
        assert list(scenario_ids[:5]) == sorted(scenario_ids[:5])
        assert list(scenario_ids[5:]) == sorted(scenario_ids[5:])
    synthetic = protocol.synthetic
    assert [case.case_id for case in synthetic.cases] == [
        "correction_peanut_allergy",
        "correction_language",
        "correction_timezone",
        "correction_review_resolution",
        "correction_shipping_address",
    ]
    assert [case.loss_rank for case in synthetic.cases] == [6, 8, 8, 10, 10]
    assert protocol.case_count == 45


def test_the_official_manifest_holds_identifiers_and_rules_only() -> None:
    data = json.loads(bundled_protocol_files().official_manifest.read_text())
    assert set(data) == {
        "schema_version",
        "protocol_id",
        "selection",
        "scenario_order",
        "loss_ranks",
        "scenarios",
    }
    text = json.dumps(data["scenarios"])
    for forbidden in ("question", "answer", "content", "haystack", "session"):
        assert forbidden not in text


def test_the_bundled_prompt_is_ours_not_the_originals() -> None:
    prompt = load_protocol().answer_prompt_path.read_text()
    original = original_prompt_text()
    assert prompt != original
    assert original.splitlines()[1] not in prompt


def test_the_bundled_cases_are_ours_not_the_originals() -> None:
    protocol = load_protocol()
    original_cases = json.loads(
        (FIXTURE_ROOT / "manifests" / "synthetic-corrections-pr4789-v1.json").read_text()
    )["cases"]
    ours = protocol.synthetic.cases
    for mine, theirs in zip(ours, original_cases, strict=True):
        assert mine.case_id == theirs["case_id"]
        assert mine.loss_rank == theirs["loss_rank"]
        assert mine.support_fact != theirs["support_fact"]
        assert mine.question != theirs["question"]


def test_the_bundled_prompt_has_the_reference_structure_and_its_hash_is_pinned() -> None:
    protocol = load_protocol()
    assert sha256(protocol.answer_prompt_path) == protocol.config.qa.answer_prompt.sha256
    lines = protocol.answer_prompt_path.read_text().split("\n")
    assert lines[0] == "SYSTEM:"
    assert lines[2:] == [
        "",
        "USER:",
        "{{CURRENT_DATE_SECTION}}STORED MEMORY:",
        "{{STORED_MEMORY}}",
        "",
        "QUESTION: {{QUESTION}}",
        "",
    ]
    assert protocol.answer_template.system == lines[1]
    assert protocol.artifacts.answer_prompt_sha256 == sha256(protocol.answer_prompt_path)
    assert protocol.artifacts.config_sha256 == sha256(protocol.files.config)


def test_answer_rendering_pins_order_date_line_and_blocks() -> None:
    template = load_protocol().answer_template  # the original's has the same structure
    messages = template.render(
        question="Where does the user live?",
        question_date="2023/05/20 (Sat) 02:21",
        facts=[("fact-b", "The cat sleeps in the study."), ("fact-a", "The user moved to Lyon.")],
    )
    assert messages[1] == {
        "role": "user",
        "content": "CURRENT DATE: 2023/05/20 (Sat) 02:21\nSTORED MEMORY:\n[fact-a]\n"
        "The user moved to Lyon.\n\n[fact-b]\nThe cat sleeps in the study.\n\n"
        "QUESTION: Where does the user live?",
    }
    assert messages[0]["role"] == "system"
    assert not messages[0]["content"].startswith("\n")
    undated = template.render(question="Q?", question_date=None, facts=[("a", "x")])
    assert undated[1]["content"].startswith("STORED MEMORY:\n")


# --- the original project's bundle --------------------------------------------------------


def test_original_fixture_files_are_byte_identical_to_the_originals() -> None:
    assert (
        sha256(FIXTURE_ROOT / "configs" / "pr4789-reproduction-v1.yaml")
        == (ORIGINAL_HASHES["config"])
    )
    manifests = FIXTURE_ROOT / "manifests"
    assert sha256(manifests / "official-manifest.json") == ORIGINAL_HASHES["official_manifest"]
    assert (
        sha256(manifests / "synthetic-corrections-pr4789-v1.json")
        == (ORIGINAL_HASHES["synthetic_manifest"])
    )


def test_the_rebuilt_original_prompt_is_byte_identical_to_the_original(tmp_path: Path) -> None:
    write_original_bundle(tmp_path)
    prompt = tmp_path / "prompts" / "answer-v1.txt"
    assert prompt.stat().st_size == 294
    assert sha256(prompt) == ORIGINAL_HASHES["answer_prompt"]


def test_the_original_bundle_loads_unchanged(tmp_path: Path) -> None:
    files = write_original_bundle(tmp_path)
    protocol = load_protocol(files)
    assert protocol.protocol_id == "deermem-hybrid-v1-pr4789-reproduction-v1"
    # its prompt path is relative to the bundle root, one level above configs/
    assert protocol.answer_prompt_path == tmp_path / "prompts" / "answer-v1.txt"
    assert protocol.artifacts._asdict() == {
        "config_sha256": ORIGINAL_HASHES["config"],
        "official_manifest_sha256": ORIGINAL_HASHES["official_manifest"],
        "synthetic_manifest_sha256": ORIGINAL_HASHES["synthetic_manifest"],
        "answer_prompt_sha256": ORIGINAL_HASHES["answer_prompt"],
    }
    ours = load_protocol()
    assert protocol.official.scenarios == ours.official.scenarios
    assert protocol.official.selection == ours.official.selection
    assert protocol.config.pool == ours.config.pool
    assert protocol.config.hybrid == ours.config.hybrid


def test_a_prompt_next_to_the_config_wins(tmp_path: Path) -> None:
    files = write_original_bundle(tmp_path)
    (tmp_path / "configs" / "prompts").mkdir()
    (tmp_path / "configs" / "prompts" / "answer-v1.txt").write_text("SYSTEM:\nother\n")
    with pytest.raises(ProtocolError) as caught:
        load_protocol(files)  # found next to the config, and its hash is not the pinned one
    assert caught.value.key == "qa.answer_prompt.sha256"


# --- strict validation ------------------------------------------------------------------


def _set(*keys: str, value: object) -> Mutation:
    def mutate(data: Any) -> None:
        for key in keys[:-1]:
            data = data[key]
        data[keys[-1]] = value

    return mutate


def _delete(*keys: str) -> Mutation:
    def mutate(data: Any) -> None:
        for key in keys[:-1]:
            data = data[key]
        del data[keys[-1]]

    return mutate


CONFIG_CASES = [
    # (mutation, key named by the error, fragment of the message)
    (_set("surprise", value=1), None, "unknown key(s) 'surprise'"),
    (_set("pool", "sizes", value=10), "pool", "unknown key(s) 'sizes'"),
    (_delete("qa", "model"), "qa", "missing key(s) 'model'"),
    (_set("schema_version", value=2), "schema_version", "must be 1"),
    (
        _set("policies", "hybrid_v1", "weights", "access", value=0.2),
        "policies.hybrid_v1.weights",
        "must sum to 1",
    ),
    (
        _set("policies", "hybrid_v1", "weights", "confidence", value=1.5),
        "policies.hybrid_v1.weights.confidence",
        "from 0.0 to 1.0",
    ),
    (
        _set("policies", "hybrid_v1", "weights", value={"confidence": 0.65, "confirmation": 0.35}),
        "policies.hybrid_v1.weights",
        "missing key(s) 'access'",
    ),
    (_set("pool", "capacities", value=[5, 7, 10]), "pool.capacities[2]", "from 1 to 9"),
    (_set("pool", "capacities", value=[0, 7]), "pool.capacities[0]", "from 1 to 9"),
    (_set("pool", "capacities", value=[5, 5, 7]), "pool.capacities", "must not repeat"),
    (_set("pool", "capacities", value=[]), "pool.capacities", "must not be empty"),
    (_set("pool", "qa_capacity", value=8), "pool.qa_capacity", "one of pool.capacities"),
    (_set("pool", "distractors", value=8), "pool.distractors", "pool.size - 1"),
    (_set("pool", "distractor_bank_size", value=5), "pool.distractor_bank_size", "at least"),
    (
        _set("pool", "distractor_max_evidence_chars", value=30),
        "pool.distractor_max_evidence_chars",
        "at least",
    ),
    (
        _set("pool", "distractor_types", value=["single-session-user"] * 2),
        "pool.distractor_types",
        "must not repeat",
    ),
    (_set("pool", "size", value=True), "pool.size", "whole number"),
    (_set("qa", "max_tokens", value="7"), "qa.max_tokens", "whole number"),
    (_set("qa", "provider", value="anthropic"), "qa.provider", "openai-compatible"),
    (_set("statistics", "alpha", value=1.0), "statistics.alpha", "strictly between"),
    (_set("evaluation_time", value="2026-08-13T00:00:00"), "evaluation_time", "time zone"),
    (_set("evaluation_time", value=datetime(2026, 8, 13)), "evaluation_time", "time zone"),
    (_set("evaluation_time", value="0001-01-01T00:00:00+01:00"), "evaluation_time", "years 1"),
    (_set("evaluation_time", value="soon"), "evaluation_time", "ISO 8601"),
    (_set("dataset", "revision", value="main"), "dataset.revision", "40 lowercase hex"),
    (_set("dataset", "sha256", value=PINNED_SHA256.upper()), "dataset.sha256", "64 lowercase"),
    (
        _set("policies", "hybrid_v1", "policy", value="hybrid-v2"),
        "policies.hybrid_v1.policy",
        "'hybrid-v1'",
    ),
    (  # reference §1.1 step 3: the config pins the grader deermem ships
        _set("qa", "grader_version", value="deterministic-overlap-v2"),
        "qa.grader_version",
        "pins grader 'deterministic-overlap-v2' but this deermem grades with "
        "'deterministic-overlap-v1'",
    ),
    (_set("qa", "grader_version", value=7), "qa.grader_version", "must be a"),
    (_set("qa", "stream", value=True), "qa.stream", "must be false"),
    (
        _set("required_policy_version", value="hybrid-v2"),
        "required_policy_version",
        "this deermem implements 'hybrid-v1'",
    ),
    (
        lambda data: data["pool"].update(size=12, distractors=11, capacities=[5, 7, 9]),
        "pool.size",
        "pools of 10 facts",
    ),
]


@pytest.mark.parametrize(("mutate", "key", "fragment"), CONFIG_CASES)
def test_invalid_configs_are_refused_naming_file_and_key(
    tmp_path: Path, mutate: Mutation, key: str | None, fragment: str
) -> None:
    files = bundle_copy(tmp_path)
    edit_yaml(files.config, mutate)
    with pytest.raises(ProtocolError) as caught:
        load_protocol(files)
    assert caught.value.file == str(files.config)
    assert caught.value.key == key
    assert fragment in str(caught.value)
    assert str(files.config) in str(caught.value)


OFFICIAL_CASES = [
    (_set("protocol_id", value="other"), "protocol_id", "pass the manifests of the same protocol"),
    (_set("loss_ranks", value=[6, 6, 6, 8, 8, 8, 10, 10, 10]), "loss_ranks", "10 values"),
    (
        _set("loss_ranks", value=[11, 6, 6, 8, 8, 8, 10, 10, 10, 10]),
        "loss_ranks[0]",
        "from 1 to 10",
    ),
    (_set("scenario_order", value=list(OFFICIAL_SCENARIOS[:3])), "scenario_order", "exactly once"),
    (
        _set("scenario_order", value=[*OFFICIAL_SCENARIOS[:3], OFFICIAL_SCENARIOS[0]]),
        "scenario_order",
        "must not repeat",
    ),
    (
        lambda data: data["scenarios"].update(extra=[]),
        "scenarios",
        "unknown key(s) 'extra'",
    ),
    (
        lambda data: data["scenarios"]["access_help"].pop(),
        "scenarios.access_help",
        "10 question ids",
    ),
    (
        lambda data: data["scenarios"]["access_help"].__setitem__(0, "01493427"),
        "scenarios.access_help[0]",
        "already pinned under 'confirmation_help'",
    ),
    (
        lambda data: data["scenarios"]["access_help"].__setitem__(0, "../etc"),
        "scenarios.access_help[0]",
        "not a plain identifier",
    ),
    (
        _set("selection", "eligible_question_types", value=["multi-session", "temporal-reasoning"]),
        "selection.eligible_question_types[0]",
        "must be one of",
    ),
    (
        _set("selection", "take_per_question_type", value=21),
        "selection.take_per_question_type",
        "= 20",
    ),
    (_set("selection", "answer_max_chars", value=0), "selection.answer_max_chars", "at least 1"),
]


@pytest.mark.parametrize(("mutate", "key", "fragment"), OFFICIAL_CASES)
def test_invalid_official_manifests_are_refused(
    tmp_path: Path, mutate: Mutation, key: str, fragment: str
) -> None:
    files = bundle_copy(tmp_path)
    edit_json(files.official_manifest, mutate)
    with pytest.raises(ProtocolError) as caught:
        load_protocol(files)
    assert (caught.value.file, caught.value.key) == (str(files.official_manifest), key)
    assert fragment in str(caught.value)


SYNTHETIC_CASES = [
    (_set("protocol_id", value="other"), "protocol_id", "is 'other'"),
    (_set("scenario", value="access_help"), "scenario", "'correction_reserve'"),
    (lambda data: data["cases"].pop(), "cases", "list of 5 cases"),
    (
        lambda data: data["cases"][1].update(case_id=data["cases"][0]["case_id"]),
        "cases[1].case_id",
        "repeats the case id",
    ),
    (lambda data: data["cases"][0].update(loss_rank=0), "cases[0].loss_rank", "from 1 to 10"),
    (lambda data: data["cases"][0].update(hint="x"), "cases[0]", "unknown key(s) 'hint'"),
    (lambda data: data["cases"][2].update(question=""), "cases[2].question", "must not be empty"),
]


@pytest.mark.parametrize(("mutate", "key", "fragment"), SYNTHETIC_CASES)
def test_invalid_synthetic_manifests_are_refused(
    tmp_path: Path, mutate: Mutation, key: str, fragment: str
) -> None:
    files = bundle_copy(tmp_path)
    edit_json(files.synthetic_manifest, mutate)
    with pytest.raises(ProtocolError) as caught:
        load_protocol(files)
    assert (caught.value.file, caught.value.key) == (str(files.synthetic_manifest), key)
    assert fragment in str(caught.value)


def test_a_prompt_that_differs_from_its_pin_is_refused_with_both_hashes(tmp_path: Path) -> None:
    files = bundle_copy(tmp_path)
    prompt = tmp_path / "answer-v1.txt"
    pinned = sha256(prompt)
    prompt.write_text(prompt.read_text().replace("INSUFFICIENT", "UNKNOWN"))
    with pytest.raises(ProtocolError) as caught:
        load_protocol(files)
    assert (caught.value.file, caught.value.key) == (str(files.config), "qa.answer_prompt.sha256")
    assert pinned in str(caught.value)
    assert sha256(prompt) in str(caught.value)


def test_a_missing_prompt_names_both_places_tried(tmp_path: Path) -> None:
    files = bundle_copy(tmp_path)
    (tmp_path / "answer-v1.txt").unlink()
    with pytest.raises(ProtocolError) as caught:
        load_protocol(files)
    assert caught.value.key == "qa.answer_prompt.path"
    assert str(tmp_path / "answer-v1.txt") in str(caught.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("SYSTEM:\nonly a system part\n", "'USER:'"),
        ("You are helpful.\n\nUSER:\n{{QUESTION}}\n", "'SYSTEM:'"),
        ("SYSTEM:\nx\n\nUSER:\n{{CURRENT_DATE_SECTION}}{{QUESTION}}\n", "{{STORED_MEMORY}}"),
    ],
)
def test_a_prompt_without_the_structure_is_refused(
    tmp_path: Path, text: str, fragment: str
) -> None:
    files = bundle_copy(tmp_path)
    prompt = tmp_path / "answer-v1.txt"
    prompt.write_text(text)
    edit_yaml(files.config, _set("qa", "answer_prompt", "sha256", value=sha256(prompt)))
    with pytest.raises(ProtocolError) as caught:
        load_protocol(files)
    assert caught.value.file == str(prompt)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("target", "content", "fragment"),
    [
        ("config", b"pool: [unclosed\n", "not valid YAML"),
        ("config", b"- a list\n- not a mapping\n", "must be a mapping"),
        ("official_manifest", b'{"schema_version": 1,', "not valid JSON"),
        # json.loads raises a plain ValueError and a RecursionError for these: one line too.
        ("official_manifest", b'{"schema_version": ' + b"1" * 5000 + b"}", "more than 4300 digits"),
        ("synthetic_manifest", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        ("synthetic_manifest", b"\xff\xfe{}", "not UTF-8"),
    ],
)
def test_unreadable_protocol_files_are_named(
    tmp_path: Path, target: str, content: bytes, fragment: str
) -> None:
    files = bundle_copy(tmp_path)
    path: Path = getattr(files, target)
    path.write_bytes(content)
    with pytest.raises(ProtocolError) as caught:
        load_protocol(files)
    assert caught.value.file == str(path)
    assert fragment in str(caught.value)


def test_a_file_of_the_wrong_kind_is_named_by_its_kind_not_quoted(tmp_path: Path) -> None:
    """A dataset given as the config: the error says what it is, not what it says."""
    files = bundle_copy(tmp_path)
    files.config.write_text('- question: "Where did I park my bike on Tuesday?"\n')
    with pytest.raises(ProtocolError) as caught:
        load_protocol(files)
    assert str(caught.value) == f"{files.config}: must be a mapping, got a list"


def test_a_value_of_nested_aliases_is_quoted_briefly(tmp_path: Path) -> None:
    """Aliases of aliases repeat a list 8**n times over: the error quotes its first items
    (deermem's one preview), never renders the whole."""
    files = bundle_copy(tmp_path)
    nested = "&a0 [1, 2]"
    for level in range(1, 7):
        nested = f"&a{level} [{nested}, {', '.join([f'*a{level - 1}'] * 8)}]"
    text = files.config.read_text()
    assert text.count("  capacities: [5, 7, 9]\n") == 1
    files.config.write_text(text.replace("[5, 7, 9]", f"[{nested}]"))
    with pytest.raises(ProtocolError, match=r"pool\.capacities\[0\]: must be a whole number"):
        load_protocol(files)
    assert vars(protocol_module)["preview"] is deermem.errors.preview  # one implementation


def test_a_missing_protocol_file_is_named(tmp_path: Path) -> None:
    files = bundle_copy(tmp_path)
    files.official_manifest.unlink()
    with pytest.raises(ProtocolError, match="cannot read the file") as caught:
        load_protocol(files)
    assert caught.value.file == str(files.official_manifest)
