"""Judging answers: the frozen grader and the paired statistics over its verdicts.

* :mod:`~deermem.eval.grading.grader` — ``deterministic-overlap-v1``, a
  pure function of a prediction and a reference answer;
* :mod:`~deermem.eval.grading.statistics` — exact McNemar and the paired
  bootstrap, reproducible to the last bit.
"""
