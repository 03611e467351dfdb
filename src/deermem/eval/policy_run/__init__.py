"""The deterministic policy run: every case at every cap under both policies.

* :mod:`~deermem.eval.policy_run.run` — the decisions of the production
  capacity gate and the result files (``policy.raw.jsonl``, ``summary.json``,
  ``run.json``);
* :mod:`~deermem.eval.policy_run.retention` — the retention table built
  from a run's summary, as plain text and Markdown.
"""
