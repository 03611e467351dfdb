"""The replay evaluation: two capacity policies on months of seeded synthetic traffic.

The static evaluation asks which facts survive one decision at a cap; the
replay asks what a deployment lives with — whether the facts a user needs are
still there when they are needed, and how much regret each policy leaves
behind. This package holds the pure parts: the parameters
(:mod:`~deermem.eval.replay.params`, a documented YAML file), the
seeded workload with its hidden ground truth
(:mod:`~deermem.eval.replay.workload`) and the paired bootstrap over
seeds (:mod:`~deermem.eval.replay.statistics`). Replaying a workload
needs a :class:`~deermem.Memory`, which sits above the evaluation's layer, so
the driver lives with the command line (:mod:`deermem.eval.replay.run`).
"""

from deermem.eval.replay.params import LoadedParams, ReplayParams, load_params
from deermem.eval.replay.statistics import Interval, paired_interval
from deermem.eval.replay.workload import (
    Correction,
    PlannedFact,
    Search,
    Session,
    Workload,
    generate,
)

__all__ = [
    "Correction",
    "Interval",
    "LoadedParams",
    "PlannedFact",
    "ReplayParams",
    "Search",
    "Session",
    "Workload",
    "generate",
    "load_params",
    "paired_interval",
]
