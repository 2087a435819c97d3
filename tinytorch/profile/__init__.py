"""Profiling (course module 14): counts, per-operation times and memory of a model.

    from tinytorch.profile import profile_step, operation_table, machine_rates
    step = profile_step(gpt, x, y)
    print(operation_table(step.rows, machine_rates()))

Each name is imported from its module on first use, so this package imports at every stage.
"""

from tinytorch import lazy_names

_HOMES = {
    **dict.fromkeys(
        ("parameter_counts", "matmul_flops", "forward_flops", "backward_flops", "gpt_step_flops"),
        "tinytorch.profile.flops",
    ),
    **dict.fromkeys(
        (
            "Event",
            "Profiler",
            "Latency",
            "latency",
            "OpRow",
            "by_operation",
            "matmul_share",
            "Profile",
            "profile_step",
            "profile_generation",
        ),
        "tinytorch.profile.profiler",
    ),
    **dict.fromkeys(
        ("machine_rates", "operation_table", "plot_time", "plot_roofline"),
        "tinytorch.profile.report",
    ),
}
__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_names("tinytorch.profile", _HOMES)
