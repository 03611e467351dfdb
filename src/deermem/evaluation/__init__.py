"""Reproducible evaluation of the capacity policies (``deermem eval ...``).

The harness rebuilds the pools of the original DeerMem evaluation from the
LongMemEval oracle file, runs them through the production capacity gate and
writes results anyone can check byte for byte. Its parts, bottom up:

* :mod:`~deermem.evaluation.protocol` — the protocol bundle (config,
  manifests, answer prompt), loaded strictly and cross-checked;
* :mod:`~deermem.evaluation.dataset` — the dataset, accepted only with its
  pinned SHA-256, and evidence rendering;
* :mod:`~deermem.evaluation.selection` and :mod:`~deermem.evaluation.cases` —
  the 40 official questions, the distractor bank and the 45 ten-fact pools;
* :mod:`~deermem.evaluation.eviction` — the deterministic policy run and its
  result files;
* :mod:`~deermem.evaluation.retention` and :mod:`~deermem.evaluation.report` —
  the retention table, printed or rendered to Markdown and PNG;
* :mod:`~deermem.evaluation.grading`, :mod:`~deermem.evaluation.statistics`,
  :mod:`~deermem.evaluation.qa_rows`, :mod:`~deermem.evaluation.qa_report` and
  :mod:`~deermem.evaluation.verify` — the frozen grader, the paired statistics,
  the graded-row schema and report files, and their byte-for-byte verification;
* :mod:`~deermem.evaluation.cli` — ``deermem eval``, kept free of the CLI and
  rendering stacks so that a run starts fast.

Nothing here imports pydantic, httpx, typer or (unless a table goes to a
terminal) rich: the commands read a 15 MB file in a few tenths of a second,
and start-up cost would otherwise dominate. The modules are imported by name;
this package file stays empty so importing one does not pull in the others.
"""

__all__: list[str] = []
