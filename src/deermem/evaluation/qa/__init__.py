"""The question-answering run: asking, storing, checking and grading answers.

* :mod:`~deermem.evaluation.qa.tasks` — the 90 answer tasks and their request
  fingerprints;
* :mod:`~deermem.evaluation.qa.providers` — who answers (an OpenAI-compatible
  endpoint, or the embedded model);
* :mod:`~deermem.evaluation.qa.responses` — the stored answers, and the proof
  that one answers its task;
* :mod:`~deermem.evaluation.qa.marker` and
  :mod:`~deermem.evaluation.qa.marker_schema` — the run marker ``qa_run.json``;
* :mod:`~deermem.evaluation.qa.run` — ``run-qa``: the resumable worker pool;
* :mod:`~deermem.evaluation.qa.rows` — the graded-row schema of ``qa.rows.jsonl``;
* :mod:`~deermem.evaluation.qa.results` — summary and statistics derived from
  the rows, the files ``grade-qa`` writes and ``verify`` re-derives;
* :mod:`~deermem.evaluation.qa.grade` — ``grade-qa``: check every answer, then
  grade them blind.
"""
