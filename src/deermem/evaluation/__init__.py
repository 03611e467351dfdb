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
* :mod:`~deermem.evaluation.qa_tasks`, :mod:`~deermem.evaluation.qa_providers`,
  :mod:`~deermem.evaluation.qa_responses`, :mod:`~deermem.evaluation.qa_marker`
  and :mod:`~deermem.evaluation.qa_run` — the QA run: the 90 answer tasks and
  their request fingerprints, who answers them, the stored answers, the run
  marker, and the resumable worker pool;
* :mod:`~deermem.evaluation.grading`, :mod:`~deermem.evaluation.statistics`,
  :mod:`~deermem.evaluation.qa_rows`, :mod:`~deermem.evaluation.qa_report`,
  :mod:`~deermem.evaluation.qa_grade` and :mod:`~deermem.evaluation.verify` —
  the frozen grader, the paired statistics, the graded-row schema and report
  files, grading a run with proof, and byte-for-byte verification;
* :mod:`~deermem.evaluation.qa_render` — graded results as Markdown and a chart;
* :mod:`~deermem.evaluation.cli` — ``deermem eval``, kept free of the CLI and
  rendering stacks so that a run starts fast.

Nothing here imports pydantic, httpx, typer or (unless a table or a progress
bar goes to a terminal) rich: the commands read a 15 MB file in a few tenths
of a second, and start-up cost would otherwise dominate. The one exception is
``run-qa``, which imports :mod:`deermem.llm` (and so httpx) to call a model.
The modules are imported by name; this package file stays empty so importing
one does not pull in the others.
"""

__all__: list[str] = []
