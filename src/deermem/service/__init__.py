"""deermem as a service: the HTTP API (:mod:`~deermem.service.http`), the MCP server
(:mod:`~deermem.service.mcp`), and what both share.

* :mod:`~deermem.service.tokens` — the tokens file, what a token may address,
  and the one bearer check;
* :mod:`~deermem.service.problems` — every deermem error as an RFC 9457 problem;
* :mod:`~deermem.service.middleware` — request ids, the ``Host``/``Origin``
  rule against DNS rebinding, the body limit (plain ASGI);
* :mod:`~deermem.service.settings` — what each server was asked for, its
  bounds, and the checks before it starts;
* :mod:`~deermem.service.warmup` — what a server loads in the background once
  it answers, so that its first requests do not wait for it.

Importing this package imports neither web framework: ``deermem token`` uses
the tokens and the settings without the ``server`` or ``mcp`` extra.
"""
