"""glibc's allocator told to keep freed memory for reuse, as PyTorch's caching allocators do.

A training step allocates the same large temporaries every time (activations, their gradients,
the scratch of each operation) and frees them again. glibc's `malloc` hands any block above a
moving threshold (128 KiB to begin with) straight to the kernel with `mmap` and returns it on
`free`: the next step's array of the same size then faults in every page again, zeroed by the
kernel. For arrays of a few MiB that costs more than the arithmetic on them (a GELU backward on a
(1024, 512) float32 array: 3.5 ms with fresh pages, 0.9 ms with reused ones).

`keep_freed_memory` asks glibc to serve blocks up to 32 MiB (its maximum) from its own heap and to
keep freed memory: it gives the top of its heap back to the kernel only when more than 1 GiB lies
free there. With a lower bound (128 MiB) the end of a medium GPT's backward frees more than that,
glibc returns it, and the next forward faults it in again (15,000 page faults and 50-200 ms of
system time per step, measured for issue 39). It also keeps every thread in that one heap
(`M_ARENA_MAX` 1): glibc otherwise gives a second thread an arena of its own, made of 64 MiB
heaps that it unmaps as soon as they are empty, so the slice of a batch `accelerate` runs on a
second thread faulted its temporaries in again at every step (3,600 faults and 30 ms of system
time a medium step). Allocations are rare next to the arithmetic, so sharing one arena's lock
costs nothing measurable. `import tinytorch` runs it once;
`TINYTORCH_KEEP_FREED_MEMORY=0` leaves the allocator alone. Other platforms and C libraries are
left as they are. `ctypes` is imported only inside the function.

Given product code (tito/curriculum/catalog.py GIVEN), not a lesson; it imports nothing from the course.
"""


def keep_freed_memory(limit: int = 32 << 20) -> bool:
    """Let glibc reuse freed blocks up to `limit` bytes instead of unmapping them (True if set)."""
    import ctypes
    import os
    import sys

    if not sys.platform.startswith("linux") or os.environ.get("TINYTORCH_KEEP_FREED_MEMORY") == "0":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # glibc only; musl has no mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold, m_arena_max = -1, -3, -8
    return (
        bool(mallopt(m_mmap_threshold, limit))
        and bool(mallopt(m_trim_threshold, 32 * limit))
        and bool(mallopt(m_arena_max, 1))
    )


__all__ = ["keep_freed_memory"]
