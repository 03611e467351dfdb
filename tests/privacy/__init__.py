"""Privacy: secrets never stored, a user erased everywhere, a user exported (issue 26)."""
