"""The question-answering run: asking, storing, checking and grading answers.

* :mod:`~deermem.eval.qa.tasks` — the 90 answer tasks and their request
  fingerprints;
* :mod:`~deermem.eval.qa.providers` — who answers (an OpenAI-compatible
  endpoint, or the embedded model);
* :mod:`~deermem.eval.qa.responses` — the stored answers, and the proof
  that one answers its task;
* :mod:`~deermem.eval.qa.marker` and
  :mod:`~deermem.eval.qa.marker_schema` — the run marker ``qa_run.json``;
* :mod:`~deermem.eval.qa.run` — ``run-qa``: the resumable worker pool;
* :mod:`~deermem.eval.qa.rows` — the graded-row schema of ``qa.rows.jsonl``;
* :mod:`~deermem.eval.qa.results` — summary and statistics derived from
  the rows, the files ``grade-qa`` writes and ``verify`` re-derives;
* :mod:`~deermem.eval.qa.grade` — ``grade-qa``: check every answer, then
  grade them blind.
"""
