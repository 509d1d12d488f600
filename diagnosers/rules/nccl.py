"""NCCL collectives: timeouts, broken connections, and slow transports.

Reads: PyTorch watchdog and heartbeat lines (or only the watchdog's `checkTimeout` C++ frames), Horovod's stall
inspector (the ranks that reached a collective waiting for the ones that did not), NCCL WARN lines,
`ncclSystemError`/`ncclRemoteError`, Gloo's lost or never-made connections, and NCCL INFO init lines
(`Using network`, `Channel ... via`, `NCCL_*_DISABLE set by environment`, `NCCL_IB_*` settings, network plugins
that failed to start).
A timeout on every rank but one usually points at that one rank; the detail says so.
"""

from __future__ import annotations

from diagnosers.evidence import Evidence
from diagnosers.findings import NCCL_NETWORK_ERROR, NCCL_SLOW_TRANSPORT, NCCL_TIMEOUT, Finding, Severity
from diagnosers.parsers.frameworks import horovod, torch_dist
from diagnosers.parsers.platform import nccl
from diagnosers.parsers.signals import Signal
from diagnosers.parsers.timings import step_lines, throughput
from diagnosers.rules.common import finding, first_attr, where

EMITS = (NCCL_TIMEOUT, NCCL_NETWORK_ERROR, NCCL_SLOW_TRANSPORT)

# Inter-node NCCL over TCP sockets reaches a few GB/s against 25-50 GB/s per IB/EFA NIC
# (NCCL's own performance notes), so Socket across nodes is the slow path worth naming.
SLOW_NETWORKS = ("Socket",)
# Lines a training loop prints as it makes progress: after a stall warning they show the collective completed.
_PROGRESS = (step_lines.STEP_TIMING, throughput.STEP_RATE)
_COMPLETED_STATES = ("SUCCEEDED", "COMPLETE", "COMPLETED")


def check(evidence: Evidence) -> list[Finding]:
    return [
        found
        for found in (_timeout(evidence), _network_error(evidence), _slow_transport(evidence))
        if found is not None
    ]


def _timeout(evidence: Evidence) -> Finding | None:
    timeouts = evidence.of(torch_dist.COLLECTIVE_TIMEOUT)
    hangs = evidence.of(torch_dist.WATCHDOG_HANG)
    frames = evidence.of(torch_dist.WATCHDOG_TIMEOUT_FRAME)
    if not timeouts and not hangs:
        return _timeout_from_frames(frames) or _horovod_stall(evidence)
    signals = timeouts or hangs
    operation = first_attr(timeouts, "op")
    limit_ms = first_attr(timeouts, "timeout_ms") or first_attr(timeouts, "wait_ms")
    what = f"An {operation}" if operation else "A"
    limit = f" after {int(limit_ms) / 1000:g} s" if limit_ms else ""
    detail = (
        f"{what} collective did not complete{limit}{where(signals)}. The ranks that time out are "
        "waiting for a peer that never joined: look for the rank that crashed, hung or was much slower "
        "(an OOM, a dead worker or a data-dependent branch) before raising the timeout."
    )
    if hangs and not timeouts:
        detail = (
            f"The ProcessGroupNCCL watchdog stopped making progress{where(hangs)}: a collective is hung. "
            "Find the rank that is not participating; set TORCH_NCCL_DUMP_ON_TIMEOUT=1 to get the stuck traces."
        )
    return finding(
        NCCL_TIMEOUT, Severity.CRITICAL, 0.85, "NCCL collective timed out", detail, signals=[*signals, *hangs]
    )


def _timeout_from_frames(frames: list[Signal]) -> Finding | None:
    """Only the watchdog's C++ stack was kept: it says a collective timed out, not which one or after how long."""
    if not frames:
        return None
    detail = (
        f"The ProcessGroupNCCL watchdog raised from WorkNCCL::checkTimeout{where(frames)}: a collective timed out, "
        "though its own `Watchdog caught collective operation timeout` line is not in the logs. Collect the full "
        "log of every rank to see the operation and the rank that never joined it."
    )
    return finding(NCCL_TIMEOUT, Severity.CRITICAL, 0.6, "NCCL collective timed out", detail, frames)


def _horovod_stall(evidence: Evidence) -> Finding | None:
    """Horovod's stall inspector on the ranks that reached a collective. A slow rank (a long validation or
    checkpoint) draws the same warning and then catches up, so a run that made progress after the last warning, or
    that completed, was not hung; one that Horovod shut down, or that kept warning, was."""
    warnings = evidence.of(horovod.STALL_WARNING)
    shutdown = evidence.of(horovod.STALL_SHUTDOWN)
    if not warnings and not shutdown:
        return None
    if not shutdown and _made_progress_after(evidence, warnings):
        return None
    missing_lines = evidence.of(horovod.MISSING_RANKS)
    missing = sorted({int(rank) for signal in missing_lines for rank in signal.get("missing").split(",")})
    waited = first_attr(warnings, "stall_s")
    named = f"rank {missing[0]}" if len(missing) == 1 else f"ranks {', '.join(map(str, missing[:8]))}"
    who = f": {named} never submitted it" if missing else ""
    detail = (
        f"Horovod's stall inspector reports a collective that some ranks submitted and the others did not"
        f"{f' for more than {waited} s' if waited else ''}{who}{where(warnings or shutdown)}. Look in the log of the "
        "missing rank for what stopped it (a crash, an OOM, a data-dependent branch or a different set of tensors), "
        "not in the ranks that are waiting."
    )
    stuck = bool(shutdown) or len(warnings) > 1 or evidence.meta.status.upper() == "FAILED"
    severity = Severity.CRITICAL if stuck else Severity.WARNING
    confidence = 0.8 if shutdown else 0.7 if stuck else 0.55
    signals = [*shutdown, *warnings[:2], *missing_lines[:2]]
    return finding(NCCL_TIMEOUT, severity, confidence, "Horovod collective stalled", detail, signals)


def _made_progress_after(evidence: Evidence, warnings: list[Signal]) -> bool:
    if evidence.meta.status.upper() in _COMPLETED_STATES:
        return True
    last: dict[str, int] = {}
    for warning in warnings:
        last[warning.quote.source] = max(last.get(warning.quote.source, 0), warning.quote.line)
    return any(
        signal.quote.line > last.get(signal.quote.source, signal.quote.line) for signal in evidence.of(*_PROGRESS)
    )


def _network_error(evidence: Evidence) -> Finding | None:
    warnings = evidence.of(nccl.NETWORK_WARN)
    system = evidence.of(nccl.SYSTEM_ERROR)
    if not warnings and not system:
        return None
    if not warnings and evidence.of(nccl.LOCAL_SETUP_FAILURE):
        # NCCL's own warning names a local cause for the system error (/dev/shm, /sys topology), not the network.
        return None
    first = (warnings or system)[0]
    local = next((warning for warning in warnings if _own_socket_failure(warning)), None)
    detail = (
        f"NCCL lost or could not open a connection between ranks{where(warnings or system)}. "
        "Check that NCCL_SOCKET_IFNAME names an interface every pod can reach, that IB/EFA devices are "
        "mounted in the pods, and whether a peer process died first (its own log will say why)."
    )
    if local is not None:
        detail += (
            f" NCCL could not even open its own socket ({_own_socket_failure(local)[:120]}): "
            "no interface matches NCCL_SOCKET_IFNAME, or the address it picked is not usable on this host, as an IPv6 "
            "link-local (fe80::…%ib0) or a down or virtual interface is not. Set NCCL_SOCKET_IFNAME to the interface "
            "with the routable address (and NCCL_SOCKET_FAMILY=AF_INET for IPv4)."
        )
    if any(warning.get("gloo") or warning.get("gloo_mesh") for warning in warnings):
        detail += (
            " Gloo (the CPU process group) chooses its interface apart from NCCL: set GLOO_SOCKET_IFNAME to one "
            "concrete interface that every rank can reach; unlike NCCL_SOCKET_IFNAME it takes no `^` exclusion list."
        )
    confidence = 0.85 if warnings else 0.6
    return finding(
        NCCL_NETWORK_ERROR,
        Severity.CRITICAL,
        confidence,
        "NCCL connection failed",
        detail,
        signals=[first, *warnings, *system],
    )


def _own_socket_failure(warning: Signal) -> str:
    """What NCCL said when it could not open a socket on this host at all: no interface to use, or one it can't bind."""
    return warning.get("local") or warning.get("interface") or warning.get("no_interface")


def _slow_transport(evidence: Evidence) -> Finding | None:
    disabled = [signal for signal in evidence.of(nccl.ENV_DISABLED) if signal.get("feature") in ("P2P", "SHM", "IB")]
    channels = evidence.of(nccl.CHANNEL)
    socket_channels = [signal for signal in channels if signal.get("transport").startswith("NET/Socket")]
    socket_networks = [signal for signal in evidence.of(nccl.NETWORK) if signal.get("network") in SLOW_NETWORKS]
    fast_devices = evidence.of(nccl.IB_DEVICE)
    nodes = _node_count(evidence)
    sockets = socket_channels or socket_networks
    fell_back = _fell_back_to_sockets(evidence, nodes)
    if not sockets and not disabled and not fell_back:
        return None
    if sockets and fast_devices:
        confidence, cause = 0.9, "IB/EFA devices are present, but NCCL moves data over TCP sockets"
    elif sockets and any(signal.get("feature") == "IB" for signal in disabled):
        confidence, cause = 0.9, "NCCL_IB_DISABLE is set, so inter-node traffic goes over TCP sockets"
    elif sockets and nodes > 1:
        confidence, cause = 0.75, f"traffic between {nodes} nodes goes over TCP sockets"
    elif socket_channels:
        confidence, cause = (
            0.7,
            "GPUs on the same node exchange data over the network path (P2P and SHM unused)",
        )
    elif fell_back and nodes > 1:
        confidence, cause = (
            0.75,
            f"NCCL found no IB/EFA device or network plugin and fell back to TCP sockets between {nodes} nodes",
        )
    elif fell_back:
        confidence, cause = (
            0.65,
            "the job is set up for IB/EFA (NCCL_IB_* settings or a network plugin that failed to start), but NCCL "
            "found no such device and fell back to TCP sockets; across nodes that is the slow path",
        )
    elif disabled:
        features = sorted({signal.get("feature") for signal in disabled})
        confidence, cause = 0.7, f"NCCL_{'/'.join(features)}_DISABLE is set, forcing a slower path"
    else:
        return None
    detail = (
        f"{cause.capitalize()}. Expect a fraction of the interconnect's bandwidth in every all-reduce. "
        "Mount the RDMA devices and NCCL network plugin in the pods, check NCCL_IB_HCA/NCCL_SOCKET_IFNAME, "
        "and remove NCCL_*_DISABLE from the environment unless a known bug needs it."
    )
    evidence_signals: list[Signal] = [*disabled, *socket_networks, *socket_channels, *fell_back, *fast_devices]
    if nodes > 1 and not socket_channels:
        evidence_signals += [signal for signal in evidence.of(nccl.COMM_NODES) if int(signal.get("nodes")) > 1][:1]
    elif fell_back:
        evidence_signals += evidence.of(nccl.FAST_NET_CONFIGURED)[:1]
    return finding(
        NCCL_SLOW_TRANSPORT,
        Severity.WARNING,
        confidence,
        "NCCL uses a slow transport",
        detail,
        signals=evidence_signals,
    )


def _fell_back_to_sockets(evidence: Evidence, nodes: int) -> list[Signal]:
    """The lines that show NCCL settled for sockets across nodes when it never says `Using network Socket`:
    no IB device or plugin, or only a `NET/Socket : Using [0]eth0` interface. On one node the job uses P2P/SHM
    and these lines are harmless, unless the job was set up for a fast network that did not come up (NCCL_IB_*
    settings, a network plugin that failed to start) and NCCL took sockets instead; any sign of IB/EFA or another
    network in use rules the fall-back out. A communicator's rank count does not stand in for the nodes: one
    DGX-2/HGX-2 host holds 16 GPUs."""
    net_channels = [signal for signal in evidence.of(nccl.CHANNEL) if signal.get("transport").startswith("NET/")]
    if nodes < 2 and not net_channels and not _fast_network_missed(evidence):
        return []
    fast_in_use = (
        evidence.of(nccl.IB_DEVICE)
        or any(signal.get("network") not in SLOW_NETWORKS for signal in evidence.of(nccl.NETWORK))
        or any(not signal.get("transport").startswith("NET/Socket") for signal in net_channels)
    )
    if fast_in_use:
        return []
    return [*evidence.of(nccl.FAST_NET_MISSING), *evidence.of(nccl.SOCKET_INTERFACE)]


def _fast_network_missed(evidence: Evidence) -> bool:
    configured = evidence.of(nccl.FAST_NET_CONFIGURED) or any(
        signal.get("plugin") for signal in evidence.of(nccl.FAST_NET_MISSING)
    )
    on_sockets = evidence.of(nccl.SOCKET_INTERFACE) or any(
        signal.get("network") in SLOW_NETWORKS for signal in evidence.of(nccl.NETWORK)
    )
    return bool(configured and on_sockets)


def _node_count(evidence: Evidence) -> int:
    """Nodes the job spans: distinct hosts in NCCL's line prefixes or the bundle, or what NCCL 2.19+ says itself
    (`nNodes 2`), which holds when the paste shows only one host's lines."""
    stated = [int(signal.get("nodes")) for signal in evidence.of(nccl.COMM_NODES)]
    return max([len(_nccl_hosts(evidence) | evidence.nodes), *stated])


def _nccl_hosts(evidence: Evidence) -> set[str]:
    return {
        signal.get("host")
        for signal in evidence.of(
            nccl.VERSION,
            nccl.CHANNEL,
            nccl.INIT_COMPLETE,
            nccl.NETWORK,
            nccl.FAST_NET_MISSING,
            nccl.SOCKET_INTERFACE,
            nccl.HOST_SEEN,
        )
        if signal.get("host")
    }
