"""The library: the domain between the capacity policies and storage.

* :mod:`~deermem.library.gate` — the capacity gate, the one way facts enter a
  library (and the regret ledger of each of its calls), and where a fact
  stands under the configured policy;
* :mod:`~deermem.library.regret` — regret: what a search reveals, and the
  per-policy report of evictions that turned out to be mistakes.
"""

from deermem.library.gate import CapacityGate, EvictionMode, GateOutcome, Proposal, Removal

__all__ = ["CapacityGate", "EvictionMode", "GateOutcome", "Proposal", "Removal"]
