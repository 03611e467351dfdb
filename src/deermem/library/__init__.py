"""The library: the domain between the policies and storage (the capacity gate, regret)."""

from deermem.library.gate import CapacityGate, EvictionMode, GateOutcome, Proposal, Removal

__all__ = ["CapacityGate", "EvictionMode", "GateOutcome", "Proposal", "Removal"]
