"""The evaluation's errors: their own module, one branch of deermem's tree."""

from __future__ import annotations

import deermem
from deermem.eval import errors


def test_every_evaluation_error_is_a_deermem_error() -> None:
    assert len(errors.__all__) == 11
    for name in errors.__all__:
        error = getattr(errors, name)
        assert issubclass(error, errors.EvaluationError)
        assert issubclass(error, deermem.DeerMemError)
