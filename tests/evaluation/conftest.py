"""Fixtures for the evaluation tests: a generated dataset and the protocol pinned to it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from deermem.cli import main
from deermem.eval.answerers import HttpAnswerer, resolve_endpoint
from deermem.eval.dataset import Dataset, EvaluationCase, build_cases, load_dataset
from deermem.eval.policy_run import PolicyOutcome, run_policy
from deermem.eval.protocol import Protocol, ProtocolFiles, load_protocol
from deermem.eval.qa import AnswerTask, QaRunSummary, run_qa
from tests.evaluation.longmemeval_data import (
    build_rows,
    copy_protocol,
    protocol_flags,
    write_dataset,
)
from tests.evaluation.qa_support import (
    API_KEY,
    BASE_URL_ENV,
    KEY_ENV,
    Bundle,
    Oracle,
    serving,
    tasks_for,
)


class Generated(NamedTuple):
    """A generated dataset and a copy of the bundled protocol that pins its hash."""

    dataset: Path
    sha256: str
    files: ProtocolFiles

    def protocol_args(self) -> list[str]:
        return protocol_flags(self.files)


class Prepared(NamedTuple):
    """The protocol, dataset, cases and all 270 decisions, computed once per session."""

    protocol: Protocol
    dataset: Dataset
    cases: tuple[EvaluationCase, ...]
    outcomes: tuple[PolicyOutcome, ...]

    def outcome(self, case_id: str, capacity: int, policy: str) -> PolicyOutcome:
        for outcome in self.outcomes:
            if (outcome.case.case_id, outcome.capacity, outcome.policy) == (
                case_id,
                capacity,
                policy,
            ):
                return outcome
        raise KeyError((case_id, capacity, policy))


@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Generated:
    root = tmp_path_factory.mktemp("generated")
    dataset = root / "longmemeval_oracle.json"
    sha256 = write_dataset(dataset, build_rows())
    return Generated(dataset, sha256, copy_protocol(root / "bundle", sha256))


@pytest.fixture(scope="session")
def prepared(generated: Generated) -> Prepared:
    protocol = load_protocol(generated.files)
    dataset = load_dataset(generated.dataset, expected_sha256=protocol.config.dataset.sha256)
    cases = build_cases(protocol, dataset)
    return Prepared(protocol, dataset, cases, run_policy(protocol, cases))


class Answered(NamedTuple):
    """A complete run-qa directory (90 answers from the oracle) under ``generated``'s bundle."""

    directory: Path
    tasks: tuple[AnswerTask, ...]


@pytest.fixture(scope="session")
def answered(
    generated: Generated, prepared: Prepared, tmp_path_factory: pytest.TempPathFactory
) -> Answered:
    """Made once through the library, over real HTTP; tests copy it before changing it."""
    directory = tmp_path_factory.mktemp("answered") / "run"
    bundle = Bundle(generated.files, generated.dataset)
    tasks = tasks_for(bundle, prepared.cases)
    with serving(Oracle(prepared.cases, tasks)) as server:
        environ = {BASE_URL_ENV: server.url, KEY_ENV: API_KEY}
        answerer = HttpAnswerer(
            prepared.protocol.config.qa,
            resolve_endpoint(prepared.protocol.config.qa, environ),
            environ=environ,
        )
        try:
            summary = run_qa(prepared.protocol, generated.dataset, directory, answerer)
        finally:
            answerer.close()
    assert summary == QaRunSummary(tasks=90, reused=0, called=90, failed=())
    return Answered(directory, tasks)


Runner = Callable[..., tuple[int, str, str]]


@pytest.fixture
def eval_cli(capsys: pytest.CaptureFixture[str]) -> Runner:
    """Run ``deermem eval ARGS...`` through the real entry point; (status, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["eval", *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
