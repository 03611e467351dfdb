"""``deermem eval report``: a run's results as Markdown and charts, for people.

* :mod:`~deermem.evaluation.report.write` — what a directory holds, rendered
  and written;
* :mod:`~deermem.evaluation.report.retention` and
  :mod:`~deermem.evaluation.report.qa` — the policy run and the graded QA
  results, each as a Markdown section and a chart;
* :mod:`~deermem.evaluation.report.png` — deterministic PNGs through matplotlib,
  the optional ``eval`` extra.
"""
