"""Measuring fairly: warm-up, repeats, medians with intervals, a process per candidate."""
