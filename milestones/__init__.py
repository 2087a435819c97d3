"""The milestones: end-to-end runs that use the tinytorch package the student built.

A plain client of `tinytorch`: it imports nothing from `tito`. `tito milestone run NAME` is
`find(NAME).run(RunOptions(...))`, with a MilestoneError shown as tito's one-line error.
"""

from milestones.errors import MilestoneError
from milestones.registry import MILESTONES, Milestone, RunOptions, find

__all__ = ["MILESTONES", "Milestone", "MilestoneError", "RunOptions", "find"]
