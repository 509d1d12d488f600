"""The process group is misconfigured: rendezvous failed, env vars missing, ranks mismatched.

Reads: torch.distributed `env://` errors (`MASTER_ADDR expected, but not set`), rendezvous and
c10d store errors (timeouts waiting for clients, cannot connect to the master; a connection attempt that is
still being retried is only a warning), invalid-rank
messages, NCCL's `Duplicate GPU detected` (two ranks on one device: LOCAL_RANK is wrong) and its bootstrap root's
`rank 1 of 8 ranks has already checked in` (two processes given one rank); JAX's
coordination service errors and any exception raised from `jax.distributed.initialize` (a JAX job's rendezvous);
an MPI launcher that could not start or reach its daemons/proxies on the hosts, or DeepSpeed's runner whose ssh
check of a hostfile host failed (no rank ran).
"""

from __future__ import annotations

from diagnosers.evidence import Evidence
from diagnosers.findings import RANK_CONFIG, Finding, Severity
from diagnosers.parsers.frameworks import jax_dist, mpi_launch, torch_dist
from diagnosers.parsers.platform import nccl
from diagnosers.parsers.signals import Signal
from diagnosers.parsers.tracebacks import PythonException
from diagnosers.rules.common import finding, first_attr, where

EMITS = (RANK_CONFIG,)


def check(evidence: Evidence) -> list[Finding]:
    missing = evidence.of(torch_dist.ENV_NOT_SET)
    duplicate = evidence.of(nccl.DUPLICATE_GPU)
    checked_in_twice = evidence.of(nccl.RANK_CHECKED_IN_TWICE)
    invalid = evidence.of(torch_dist.INVALID_RANK)
    ordinal = evidence.of(torch_dist.INVALID_DEVICE_ORDINAL)
    rendezvous = evidence.of(torch_dist.RENDEZVOUS_FAILED)
    coordination = evidence.of(jax_dist.COORDINATION_FAILED)
    jax_init = [exception for exception in evidence.exceptions if _raised_by_jax_initialize(exception)]
    retries = evidence.of(torch_dist.RENDEZVOUS_RETRY)
    launch = evidence.of(mpi_launch.LAUNCH_FAILED)
    signals = [*missing, *duplicate, *checked_in_twice, *invalid, *ordinal, *rendezvous, *coordination, *launch]
    if not signals and not jax_init:
        return _retrying(retries)
    if missing:
        variable = first_attr(missing, "variable") or first_attr(missing, "key")
        cause = f"{variable} is not set in the worker's environment"
        fix = "Launch through Ray Train/torchrun, which set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE."
    elif duplicate:
        cause = "two ranks picked the same GPU, so LOCAL_RANK/CUDA_VISIBLE_DEVICES is wrong"
        fix = (
            "Call torch.cuda.set_device(local_rank) before init_process_group and do not override CUDA_VISIBLE_DEVICES."
        )
    elif checked_in_twice:
        rank = first_attr(checked_in_twice, "rank")
        cause = f"two processes started as rank {rank} (NCCL's bootstrap root heard from it twice)"
        fix = (
            "Give each node its own NODE_RANK / node offset and make the launcher's task count match: under SLURM, "
            "--ntasks-per-node must equal the GPUs per node the trainer is told (Lightning's devices=), or every "
            "node starts the same ranks."
        )
    elif ordinal:
        cause = "a rank asked for a GPU index this process cannot see (more ranks than visible GPUs on the node)"
        fix = (
            "Start as many ranks per node as it has GPUs (--nproc_per_node, Ray Train's num_workers x GPUs), and "
            "use cuda:LOCAL_RANK only where CUDA_VISIBLE_DEVICES was not already narrowed to one GPU per process."
        )
    elif invalid:
        cause = "a rank number is outside the world size or the ranks disagree on it"
        fix = "Make WORLD_SIZE equal workers x GPUs per worker and derive RANK from the launcher, not by hand."
    elif coordination or jax_init:
        said = first_attr(coordination, "error") or jax_init[0].message
        cause = "the JAX processes could not rendezvous through the coordination service: " + said[:200]
        fix = (
            "Start every process (num_processes of them, each with its own process_id), check that "
            "coordinator_address names process 0's host and a port the others can reach, and look in the log of a "
            "process named in `Timed out task names` for why it never joined."
        )
    elif launch:
        cause = "the launcher could not start or reach its daemons on the hosts, so no rank ran: " + first_attr(
            launch, "error"
        )
        fix = (
            "Check that every host accepts passwordless ssh from the launching one (on the port given in "
            "plm_rsh_args, if any), that the launcher's daemon (Open MPI's orted, Hydra's proxy) is on the remote "
            "PATH, that the host names in the hostfile resolve to addresses the others can reach, and that no "
            "firewall blocks the launcher's ports between nodes; the ssh or socket error just above names the host."
        )
    else:
        cause = "the ranks could not rendezvous: " + first_attr(rendezvous, "error")[:200]
        fix = (
            "Check that MASTER_ADDR resolves and MASTER_PORT is open between pods, that every rank starts "
            "(a missing pod leaves the others waiting), and that WORLD_SIZE matches the number of ranks."
        )
    detail = f"The process group is misconfigured: {cause}. {fix}"
    quotes = [exception.quote for exception in jax_init[:1]]
    return [finding(RANK_CONFIG, Severity.CRITICAL, 0.85, "Process group misconfigured", detail, signals, quotes)]


def _raised_by_jax_initialize(exception: PythonException) -> bool:
    return any(
        frame.file.endswith("jax/_src/distributed.py") and frame.function == "initialize" for frame in exception.frames
    )


def _retrying(retries: list[Signal]) -> list[Finding]:
    """c10d retrying its connection to the store, with no error yet: it may still get through, or hang until the
    store's timeout (30 minutes by default) while the paste stops here."""
    if not retries:
        return []
    detail = (
        f"c10d could not reach the rendezvous store{where(retries)}: {first_attr(retries, 'error')[:200]}. It retries "
        "until its timeout; if the job hangs here, MASTER_ADDR does not resolve to an address this host can reach "
        "(on Windows `localhost` may resolve to kubernetes.docker.internal: use 127.0.0.1), MASTER_PORT is closed, "
        "or the rank that hosts the store (rank 0) has not started."
    )
    return [finding(RANK_CONFIG, Severity.WARNING, 0.6, "Rendezvous store unreachable (retrying)", detail, retries)]
