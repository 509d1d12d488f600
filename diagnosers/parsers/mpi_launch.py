"""MPI launchers that could not start the job's processes on the hosts they were given.

Open MPI's mpirun starts a daemon (orted; prted from Open MPI 5) on every host, over ssh or the batch system,
before any rank runs. When that fails (ssh refused or on another port, orted not on the remote PATH, a host that
does not resolve) it prints the same help text in every release: `ORTE was unable to reliably start one or more
daemons.` (`PRTE was unable ...` from 5.0). No rank ran, so the job's process group was never formed.
"""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

DAEMONS_NOT_STARTED = "mpi.daemons-not-started"

PATTERNS = (
    pattern(
        DAEMONS_NOT_STARTED,
        ["was unable to reliably start one or more daemons"],
        r"(?P<launcher>ORTE|PRTE) was unable to reliably start one or more daemons",
        [
            "ORTE was unable to reliably start one or more daemons.",
            "PRTE was unable to reliably start one or more daemons.",
        ],
    ),
)
