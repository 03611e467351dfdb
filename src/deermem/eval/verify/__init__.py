"""Verifying published QA results: re-derive them from their rows, compare byte for byte.

* :mod:`~deermem.eval.verify.check` — :func:`verify_results`, every check;
* :mod:`~deermem.eval.verify.rows` — the line-by-line checks of
  ``qa.rows.jsonl``;
* :mod:`~deermem.eval.verify.jsondiff` — where two JSON documents differ;
* :mod:`~deermem.eval.verify.findings` — what a verification found;
* :mod:`~deermem.eval.verify.render` — the summary a person reads.
"""
