"""Verifying published QA results: re-derive them from their rows, compare byte for byte.

* :mod:`~deermem.evaluation.verify.check` — :func:`verify_results`, every check;
* :mod:`~deermem.evaluation.verify.rows` — the line-by-line checks of
  ``qa.rows.jsonl``;
* :mod:`~deermem.evaluation.verify.jsondiff` — where two JSON documents differ;
* :mod:`~deermem.evaluation.verify.findings` — what a verification found;
* :mod:`~deermem.evaluation.verify.render` — the summary a person reads.
"""
