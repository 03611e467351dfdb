"""``deermem eval report``: a run's results as Markdown and charts, for people.

* :mod:`~deermem.eval.report.write` — what a directory holds, rendered
  and written;
* :mod:`~deermem.eval.report.retention` and
  :mod:`~deermem.eval.report.qa` — the policy run and the graded QA
  results, each as a Markdown section and a chart;
* :mod:`~deermem.eval.report.png` — deterministic PNGs through matplotlib,
  the optional ``eval`` extra.
"""
