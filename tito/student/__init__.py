"""The student's side: opening, completing and resetting a module, running its tests, progress,
and `tito diagnose`. May use tito.curriculum and tito.sandbox; never tito.grading or tito.cli."""
