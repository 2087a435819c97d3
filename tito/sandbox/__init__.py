"""Running code tito does not trust: bubblewrap, cgroups, their limits, and the scripts that run
inside (a check, a trace) with the wire format they answer in. Imports nothing else of tito."""
