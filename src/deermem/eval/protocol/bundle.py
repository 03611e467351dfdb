"""A protocol bundle: config, two manifests and an answer prompt, loaded and cross-checked.

Loading a protocol is the *contract load* every ``deermem eval`` command runs
first (reference ``eval-harness-spec.md`` §1.1): each file is read once, hashed
from the same bytes it is parsed from, validated strictly, and then checked
against the others and against the production code — one protocol id across
the three files, the grader version the config pins equal to the grader
deermem ships, the ``hybrid-v1`` version the config requires equal to the one
deermem implements, the prompt's SHA-256 equal to the config's pin.

deermem's own bundle ships as package data (:func:`bundled_protocol_files`);
any other bundle with the same schema loads the same way, the original
project's included.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Final, NamedTuple

from deermem.eval.errors import ProtocolError
from deermem.eval.grading.grader import GRADER_VERSION
from deermem.eval.protocol._yaml import RepeatedKeyError, YAMLSyntaxError, load_yaml
from deermem.eval.protocol.config import EvaluationConfig, parse_config
from deermem.eval.protocol.manifests import (
    MAX_LOSS_RANK,
    OfficialManifest,
    SyntheticManifest,
    parse_official_manifest,
    parse_synthetic_manifest,
)
from deermem.eval.protocol.prompt import AnswerTemplate
from deermem.policy import POLICY_CONFIDENCE, POLICY_HYBRID_V1

__all__ = [
    "BUNDLE_DIRECTORY",
    "POLICY_ORDER",
    "Protocol",
    "ProtocolArtifacts",
    "ProtocolFiles",
    "bundled_protocol_files",
    "load_config",
    "load_protocol",
]

BUNDLE_DIRECTORY: Final = Path(__file__).parent / "bundled"
# Every run compares the two policies in this order (rows, tables, tasks).
POLICY_ORDER: Final = (POLICY_CONFIDENCE, POLICY_HYBRID_V1)


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
