"""The evaluation's errors: their own module, one branch of deermem's tree, not its API."""

from __future__ import annotations

import deermem
from deermem.eval import errors


def test_every_evaluation_error_is_a_deermem_error_kept_in_its_package() -> None:
    assert len(errors.__all__) == 11
    for name in errors.__all__:
        error = getattr(errors, name)
        assert issubclass(error, errors.EvaluationError)
        assert issubclass(error, deermem.DeerMemError)
        assert name not in deermem.__all__  # issue 21: the evaluation's errors stay in eval
