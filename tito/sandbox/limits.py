"""Every limit tito puts on code it does not trust, in one table. The sandbox (bwrap.py,
cgroups.py), the scoring and the diagnosis read them here; the scripts that run inside
(check_runner.py, trace_runner.py) receive theirs in the job tito sends them.
"""

MiB = 2**20

# memory: a check's own address space, and the whole sandbox around it (the launcher, bubblewrap
# and the check together, capped by a cgroup where one can be made)
PROCESS_MEMORY = 2048 * MiB
SANDBOX_MEMORY = PROCESS_MEMORY + 256 * MiB
TASKS = 128  # processes and threads of a whole sandbox, where a cgroup can count them
TMP_BYTES = 64 * MiB  # the sandbox's /tmp
SHM_BYTES = 8 * MiB  # its /dev/shm

# one check's process: resource limits set inside the sandbox before any submitted code runs
RLIMITS = {
    "RLIMIT_AS": PROCESS_MEMORY,
    "RLIMIT_NPROC": 64,  # the kernel exempts root (docs/instructor.md, "what is not protected")
    "RLIMIT_FSIZE": 16 * MiB,
    "RLIMIT_CORE": 0,
    "RLIMIT_NOFILE": 256,
}
SLACK = 3.0  # seconds a check gets beyond its timeout: Python and numpy start, setup cells

# a submitted notebook, read by tito before nbformat or nbgrader sees it (grading/submissions.py):
# reading it must cost time bounded like a sandbox's (a 50,000-cell notebook took nbformat and
# nbgrader a minute; 2,000 cells take under a second)
NOTEBOOK_BYTES = 32 * MiB  # a notebook larger than this is not read
NOTEBOOK_CELLS = 2000  # cells (the course's longest module has 44)
NOTEBOOK_OUTPUTS = 10_000  # outputs, of all cells together
FOLDER_ENTRIES = 1000  # files and folders a submission folder may hold
JSON_DEPTH = 64  # nesting of the notebook's JSON (a real notebook nests about 8 deep)
CODE_CHARS = 200_000  # characters of code in one graded cell
CODE_DEPTH = 100  # nesting of one graded cell's syntax tree (expressions, blocks)

# what comes back out of a sandbox, bounded before anything parses it
OUTPUT_BYTES = 4 * MiB  # tito reads at most this much of a run's output
CHECK_OUTPUT_BYTES = 1 * MiB  # what one check may print
NUMBERS_BYTES = 512 * 1024  # arrays one check's probes may return (sent as base64)
JUDGE_BYTES = 1 * MiB  # what the judge unpacks of one check's numbers (base64 and record)
TRACE_NUMBERS_BYTES = 8 * MiB  # arrays a sandboxed trace may send back (module 13's: 4.2 MB)
TRACE_BYTES = 2 * TRACE_NUMBERS_BYTES  # those and the record of events (module 13's: 3.8 MB)
LOCAL_TRACE_NUMBERS_BYTES = 256 * MiB  # a student's own trace, on their machine, of numbers
LOCAL_TRACE_BYTES = 300 * MiB  # and with its record of events
WIRE_ARRAYS = 20_000  # arrays in one reply (module 13's reference trace: 6,816)
WIRE_DEPTH = 32  # nesting of a reply's JSON record (a trace's nests 6 deep)
TRACE_EVENTS = 4000  # operations one check's trace may record (trace_runner.MAX_EVENTS)


def check_seconds(timeout: float) -> float:
    """Seconds one check's process may live: the cells before the check share one timeout, the
    check has its own (check_runner.py kills it after that)."""
    return 2 * timeout + 1
