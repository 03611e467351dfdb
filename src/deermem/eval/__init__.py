"""Reproducible evaluation of the capacity policies (``deermem eval ...``).

The harness rebuilds the pools of the original DeerMem evaluation from the
LongMemEval oracle file, runs them through the production capacity gate and
writes results anyone can check byte for byte. It imports the memory library's
policy layer (and, to call a model, its LLM client), nothing else of it.

Its sub-packages, bottom up, each with one job:

* :mod:`~deermem.eval.grading` — the frozen answer grader and the paired
  statistics;
* :mod:`~deermem.eval.protocol` — the protocol bundle, the pinned dataset
  and the 45 cases built from them;
* :mod:`~deermem.eval.policy_run` — ``run-policy``: every case through
  the production capacity gate, and the retention table;
* :mod:`~deermem.eval.qa` — ``run-qa`` and ``grade-qa``: answer tasks,
  providers, stored answers, the run marker, graded rows and their summary;
* :mod:`~deermem.eval.verify` — ``verify``: published results re-derived
  from their rows and compared byte for byte;
* :mod:`~deermem.eval.report` — ``report``: Markdown and charts for people;
* :mod:`~deermem.cli.eval` — the ``deermem eval`` commands.

Shared by them: :mod:`~deermem.eval.errors` (the evaluation's branch of
the exception tree), :mod:`~deermem.eval.result_files` (canonical JSON,
atomic writes that never overwrite) and :mod:`~deermem.eval.provenance`
(the git state a run records).
"""
