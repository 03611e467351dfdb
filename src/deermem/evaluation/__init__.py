"""Reproducible evaluation of the capacity policies (``deermem eval ...``).

The modules here are imported by name (``deermem.evaluation.grading``,
``deermem.evaluation.statistics``, ...); this package file stays empty on
purpose so that importing one of them does not pull in the others.
"""
