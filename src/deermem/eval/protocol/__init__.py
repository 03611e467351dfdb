"""The protocol: its files, the dataset it pins, and the 45 cases built from both.

* :mod:`~deermem.eval.protocol.bundle` — loading a bundle (config, two
  manifests, answer prompt) strictly and cross-checking it; deermem's own
  bundle ships in ``bundled/``;
* :mod:`~deermem.eval.protocol.config`,
  :mod:`~deermem.eval.protocol.manifests` and
  :mod:`~deermem.eval.protocol.prompt` — the schema of each file;
* :mod:`~deermem.eval.protocol.dataset` — the LongMemEval file, accepted
  only with its pinned SHA-256, and evidence rendering;
* :mod:`~deermem.eval.protocol.selection` and
  :mod:`~deermem.eval.protocol.cases` — the 40 official questions, the
  distractor bank and the ten-fact pools.
"""
