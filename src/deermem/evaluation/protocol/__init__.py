"""The protocol: its files, the dataset it pins, and the 45 cases built from both.

* :mod:`~deermem.evaluation.protocol.bundle` — loading a bundle (config, two
  manifests, answer prompt) strictly and cross-checking it; deermem's own
  bundle ships in ``bundled/``;
* :mod:`~deermem.evaluation.protocol.config`,
  :mod:`~deermem.evaluation.protocol.manifests` and
  :mod:`~deermem.evaluation.protocol.prompt` — the schema of each file;
* :mod:`~deermem.evaluation.protocol.dataset` — the LongMemEval file, accepted
  only with its pinned SHA-256, and evidence rendering;
* :mod:`~deermem.evaluation.protocol.selection` and
  :mod:`~deermem.evaluation.protocol.cases` — the 40 official questions, the
  distractor bank and the ten-fact pools.
"""
