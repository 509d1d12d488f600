"""MPI launchers that could not start, or reach, the job's processes on the hosts they were given.

Open MPI's mpirun starts a daemon (orted; prted from Open MPI 5) on every host, over ssh or the batch system,
before any rank runs. When that fails (ssh refused or on another port, orted not on the remote PATH, a host that
does not resolve) it prints the same help text in every release: `ORTE was unable to reliably start one or more
daemons.` (`PRTE was unable ...` from 5.0). MPICH's and Intel MPI's Hydra start a proxy per host that connects back
to mpiexec; a proxy that cannot (a firewall, no route, a name that resolves elsewhere) says `unable to connect to
server <host> at port <port> (check for firewalls!)` from `pmip.c`, and Intel MPI's launcher gives up with `error
setting up the bootstrap proxies`. DeepSpeed's multi-node runner first runs `ssh -o PasswordAuthentication=no <host>
hostname` for every host in its hostfile and stops when one fails (`... returned non-zero exit status 255`, then `Using
hostfile at ... but host=... was not reachable via ssh`). Either way no rank ran, so the job's process group was never
formed.
"""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

LAUNCH_FAILED = "mpi.launch-failed"

PATTERNS = (
    pattern(
        LAUNCH_FAILED,
        [
            "was unable to reliably start one or more daemons",
            "(check for firewalls!)",
            "error setting up the bootstrap proxies",
        ],
        r"(?P<error>(?:ORTE|PRTE) was unable to reliably start one or more daemons"
        r"|unable to connect to server \S+ at port \d+ \(check for firewalls!\)"
        r"|error setting up the bootstrap proxies)",
        [
            "ORTE was unable to reliably start one or more daemons.",
            "PRTE was unable to reliably start one or more daemons.",
            "[proxy:0:1@node2] main (pm/pmiserv/pmip.c:185): unable to connect to server node1 at port 35322 (check "
            "for firewalls!)",
            "[mpiexec@hb120v3-3] HYD_print_bstrap_setup_error_message (../../../../../src/pm/i_hydra/mpiexec/intel/"
            "i_mpiexec.c:1015): error setting up the bootstrap proxies",
        ],
    ),
    pattern(
        LAUNCH_FAILED,
        ["ssh -o PasswordAuthentication=no ", "was not reachable via ssh"],
        r"(?P<error>Command 'ssh -o PasswordAuthentication=no \S+ hostname' returned non-zero exit status \d+"
        r"|but host=\S+ was not reachable via ssh)",
        [
            "subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no 192.168.3.100 hostname' returned "
            "non-zero exit status 255.",
            "RuntimeError: Using hostfile at /home/user/hostfile but host=gpu-node-11 was not reachable via ssh. If "
            "you are running with a single node please remove /home/user/hostfile or setup passwordless ssh.",
        ],
    ),
)
