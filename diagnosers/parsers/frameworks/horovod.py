"""Horovod's stall inspector: the ranks that reached a collective, telling which ranks never did.

Every Horovod release prints the same warning when some ranks have submitted a tensor and the others have not
for a minute (HOROVOD_STALL_CHECK_TIME_SECONDS): `One or more tensors were submitted to be reduced, gathered or
broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds.` Up to 0.15 it
went to stderr with `WARNING: `, later through glog (`W horovod/common/operations.cc:588]`, from 0.19
`stall_inspector.cc`). The ranks it waits for follow: `Stalled ops:` with `<tensor> [missing ranks: 3]` per tensor
(0.1x; the oldest `[ready ranks: 0, 1]`), or `Stalled ranks:`/`Missing ranks:` and a `3: [<tensors>]` line per
rank (0.19+), which ends `Will shutdown.` once HOROVOD_STALL_SHUTDOWN_TIME_SECONDS has passed.
"""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

STALL_WARNING = "horovod.stall-warning"
MISSING_RANKS = "horovod.missing-ranks"
STALL_SHUTDOWN = "horovod.stall-shutdown"

PATTERNS = (
    pattern(
        STALL_WARNING,
        ["waiting for remainder of ranks"],
        r"waiting for remainder of ranks for more than (?P<stall_s>\d+) seconds",
        [
            "WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks "
            "and are waiting for remainder of ranks for more than 60 seconds. This may indicate that different ranks "
            "are trying to submit different tensors or that only subset of ranks is submitting tensors, which will "
            "cause deadlock.",
            "[2019-04-13 13:56:31.861697: W horovod/common/operations.cc:588] One or more tensors were submitted to "
            "be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more "
            "than 60 seconds. This may indicate that different ranks are trying to submit different tensors or that "
            "only subset of ranks is submitting tensors, which will cause deadlock.",
        ],
    ),
    pattern(
        MISSING_RANKS,
        ["[missing ranks:"],
        r"\[missing ranks: ?(?P<missing>\d+(?:, ?\d+)*)\]",
        [
            "v0/tower_0/HorovodAllreduce_v0_tower_0_gradients_AddN_37_0 [missing ranks: 815]",
            "Stalled ops:HorovodBroadcast_dense_1_bias_0 [missing ranks: 1, 3]",
        ],
    ),
    pattern(
        STALL_SHUTDOWN,
        ["is stalled for longer than"],
        r"is stalled for longer than (?P<shutdown_s>\d+) seconds\. Will shut ?down",
        ['One or more rank (marked by "!") is stalled for longer than 600 seconds. Will shutdown.'],
    ),
)
