"""NCCL_DEBUG=INFO/WARN output, as NCCL 2.x prints it.

Lines look like `host:pid:tid [dev] NCCL INFO ...`, often behind a Ray prefix
`(RayTrainWorker pid=..., ip=...)`. The transport lines say how each channel moves data:
`via P2P/IPC`, `via SHM/direct/direct`, `via NET/IB/0/GDRDMA`, `via NET/Socket/1`.
"""

from __future__ import annotations

import re

from diagnosers.parsers.signals import pattern

VERSION = "nccl.version"
NETWORK = "nccl.network"
CHANNEL = "nccl.channel"
ENV_DISABLED = "nccl.env-disabled"
IB_DEVICE = "nccl.ib-device"
FAST_NET_CONFIGURED = "nccl.fast-net-configured"
INIT_COMPLETE = "nccl.init-complete"
COMM_NODES = "nccl.comm-nodes"
FAST_NET_MISSING = "nccl.fast-net-missing"
SOCKET_INTERFACE = "nccl.socket-interface"
NETWORK_WARN = "nccl.network-warn"
SYSTEM_ERROR = "nccl.system-error"
DUPLICATE_GPU = "nccl.duplicate-gpu"
RANK_CHECKED_IN_TWICE = "nccl.rank-checked-in-twice"
HOST_SEEN = "nccl.host-seen"
# NCCL failing on this host before any connection: its shared-memory segment in /dev/shm, or the PCI topology it reads
# from /sys. The `unhandled system error` that follows is then no network fault.
LOCAL_SETUP_FAILURE = "nccl.local-setup-failure"

# A network plugin (aws-ofi-nccl, NCCL's own NET/Plugin loader) that was found but could not start: NCCL goes on
# without it, so this is a fall-back, not a lost connection.
_PLUGIN_INIT_FAILED = (
    r"(?:[Ff]ailed to initiali[sz]e|[Ff]ailing initiali[sz]ation|initiali[sz]ation failed"
    r"|[Cc]ouldn't find any optimal provider|[Uu]nable to find a protocol|Only EFA provider is supported)"
)
# Where a line's NCCL message starts: `host:pid:tid [dev] NCCL INFO`, or `[dev] NCCL INFO` where a paste lost the rest.
_MESSAGE_START = re.compile(r"(?:(?<!\S)[A-Za-z0-9][\w.-]*:\d+:\d+ )?\[\d+\] NCCL (?:INFO|WARN)\b")


def pasted_messages(text: str) -> list[str]:
    """The NCCL messages of a line into which a paste ran several together (`... No device found. [0] NCCL INFO
    NET/Socket : Using ...`), each from its marker to the next; the line itself when it holds one."""
    if text.count("] NCCL ") < 2:
        return [text]
    starts = [found.start() for found in _MESSAGE_START.finditer(text)]
    if len(starts) < 2:
        return [text]
    starts[0] = 0
    return [text[start:end] for start, end in zip(starts, [*starts[1:], len(text)], strict=True)]


PATTERNS = (
    pattern(
        VERSION,
        ["NCCL version"],
        r"NCCL INFO NCCL version (?P<version>[\w.+-]+)",
        ["node-1:4242:4242 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"],
    ),
    pattern(
        NETWORK,
        ["Using network", "Using internal Network"],
        # NCCL 2.3 said `Using internal Network Socket`; 2.4+ says `Using network Socket`.
        r"NCCL INFO Using (?:internal )?[Nn]etwork (?P<network>[\w ./-]+?)\s*$",
        [
            "gpu-a:1:1 [0] NCCL INFO Using network Socket",
            "gpu2:46654:46654 [0] NCCL INFO Using internal Network Socket",
            "(RayTrainWorker pid=77, ip=10.0.0.3) gpu-b:9:9 [1] NCCL INFO Using network AWS Libfabric",
        ],
    ),
    pattern(
        CHANNEL,
        [" via "],
        # NCCL 2.4 and older print `Ring 00 : 1 -> 0 [receive] via NET/Socket/0`, without bus ids.
        r"NCCL INFO (?:Channel|Ring) \d+(?:/\d+)?\s*:\s*(?P<src>\d+)(?:\[[\dA-Fa-fx]+\])?\s*->\s*"
        r"(?P<dst>\d+)(?:\[[\dA-Fa-fx]+\])?(?:\s*\[(?:send|receive)\])?\s+via\s+(?P<transport>\S+)",
        [
            "ZBOX-1:10379:10390 [0] NCCL INFO Ring 00 : 1 -> 0 [receive] via NET/Socket/0",
            "h1:22:30 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
            "h1:22:30 [3] NCCL INFO Channel 01 : 3[3d000] -> 4[3e000] via SHM/direct/direct",
            "h2:7:9 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
            "h2:7:9 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/Socket/0",
        ],
    ),
    pattern(
        ENV_DISABLED,
        ["_DISABLE set by environment"],
        r"NCCL_(?P<feature>P2P|SHM|IB|NET_GDR|NVLS|CUMEM)_DISABLE set by environment to (?P<value>[1-9]|true|yes)\b",
        ["h1:22:30 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1"],
        caseless=True,
    ),
    pattern(
        IB_DEVICE,
        ["NET/IB : Using", "NET/OFI Selected", "NET/OFI Selected provider"],
        r"NET/IB : Using \[\d+\](?P<device>\S+)|NET/OFI Selected [Pp]rovider is (?P<provider>\w+)",
        [
            "h1:22:30 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.5<0>",
            "h3:5:5 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)",
        ],
    ),
    pattern(
        FAST_NET_MISSING,
        [
            "NET/IB : No device found",
            "Failed to open libibverbs",
            "Failed to initialize any NET plugin",
            "NET/OFI",
            "NET/Plugin",
        ],
        # What NCCL prints when neither IB verbs nor a network plugin (aws-ofi-nccl, fastsocket) came up;
        # a plugin that is merely absent (`No plugin found`) is normal on IB clusters and is not matched.
        r"(?P<missing>NET/IB : No device found|Failed to open libibverbs\S*|Failed to initialize any NET plugin"
        rf"|(?P<plugin>NET/(?:OFI|Plugin)\s*:?\s.*?{_PLUGIN_INIT_FAILED}))",
        [
            "ip-10-0-1-2:45:45 [0] NCCL INFO NET/IB : No device found.",
            "h1:5:5 [0] NCCL INFO Failed to open libibverbs.so[.1]",
            "h1:5:5 [0] NCCL INFO NET/OFI Unable to find a protocol that worked.  Failing initialization.",
            "h1:5:5 [0] init.cc:212 NCCL WARN Failed to initialize any NET plugin",
            "algo-1:7:8 [5] nccl_net_ofi_create_plugin:259 NCCL WARN NET/OFI aws-ofi-nccl initialization failed",
            "ip-10-0-0-112:8166:8166 [7] ofi_init:700 NCCL WARN NET/OFI Only EFA provider is supported",
        ],
    ),
    pattern(
        FAST_NET_CONFIGURED,
        ["NCCL_IB_"],
        # Whoever sets NCCL_IB_HCA, NCCL_IB_GID_INDEX and the like means the job to use InfiniBand/RoCE; NCCL 2.2x
        # prints `NCCL_IB_HCA set to mlx5_0:1,...` as it parses the list.
        r"NCCL INFO NCCL_IB_(?!DISABLE\b)(?P<setting>\w+) set (?:by environment )?to (?P<value>\S+)",
        [
            "[0] NCCL INFO NCCL_IB_HCA set to mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1",
            "h1:5:5 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.",
        ],
    ),
    pattern(
        SOCKET_INTERFACE,
        ["NET/Socket : Using ["],
        r"NET/Socket : Using \[\d+\](?P<interface>[^:\s]+)",
        ["ip-10-0-1-2:45:45 [0] NCCL INFO NET/Socket : Using [0]ens3:10.0.1.2<0>"],
    ),
    # Lines every rank prints once as it starts (or once per communicator), read only for the host in their prefix:
    # a paste that shows one node's transport lines often shows its peers' start-up, which proves the job spans nodes.
    pattern(
        HOST_SEEN,
        # ` INFO NCCL_` stops before `_DISABLE set by environment`: overlapping needles would hide one another from
        # the regex fallback scanner.
        ["Bootstrap : Using", "Setting affinity for GPU", " INFO NCCL_"],
        r"^\S+:\d+:\d+ \[\d+\] NCCL INFO (?:Bootstrap : Using|Setting affinity for GPU|NCCL_\w+ set by environment to)",
        [
            "ip-10-0-13-129:8537:8596 [0] NCCL INFO Setting affinity for GPU 0 to ffffffff,ffffffff,ffffffff",
            "ip-10-0-13-129:8537:8596 [0] NCCL INFO NCCL_TREE_THRESHOLD set by environment to 0.",
            "node189:1379562:1379562 [0] NCCL INFO Bootstrap : Using enp36s0f1:10.0.129.189<0>",
        ],
    ),
    pattern(
        INIT_COMPLETE,
        ["Init COMPLETE"],
        r"rank (?P<rank>\d+) nranks (?P<nranks>\d+).*Init COMPLETE",
        ["h1:22:30 [0] NCCL INFO comm 0x5581 rank 0 nranks 16 cudaDev 0 busId 1a000 - Init COMPLETE"],
    ),
    pattern(
        COMM_NODES,
        ["nNodes"],
        # NCCL 2.19+ states how many nodes a communicator spans, so one node's paste can show a multi-node job.
        r"comm \S+ rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nodes>\d+) localRanks (?P<local>\d+)",
        ["h1:7:9 [0] NCCL INFO comm 0x5639e9f0e8c0 rank 0 nRanks 24 nNodes 3 localRanks 8 localRank 0 MNNVL 0"],
    ),
    pattern(
        NETWORK_WARN,
        [
            "NCCL WARN",
            " WARN Call to ",
            " WARN NET/",
            " WARN Net :",
            "remote process exited or there was a network error",
            "ncclRemoteError",
            "socketStartConnect",
            "socketPollConnect",
            "socketProgress",
            "socketFinalizeAccept",
            "Connection closed by peer",
            "Connection reset by peer",
            # NCCL 2.0-2.3 wrote `include/socket.h:371 WARN ...` without the word NCCL.
            "WARN Connection closed",
            "WARN Socket creation failed",
            "Got completion from peer",
            "Net : Connection",
            "Net : Call to",
            "Error encountered progressing operation=Connect",
            "connectFullMesh failed",
            "gloo/transport/tcp/pair.cc",
            "Proxy Call to rank",
            "no socket interface found",
            "neither AF_INET",
            "WARN: Function:",
            "connect returned",
        ],
        # NCCL 2.0-2.2 printed `file:line WARN` without the word NCCL, aws-ofi-nccl up to 1.0 `WARN: Function: f
        # Line: N:`; a line that ends in `retrying` is a connect that NCCL tries again (it fails later with its own
        # line if it never succeeds).
        r"(?:NCCL WARN|\.(?:cc|cu|h|c):\d+ WARN|WARN: Function: \w+ Line: \d+:) (?!.*retrying\W*$).*"
        r"(?P<what>(?i:Connection closed|"
        r"Connection reset|Connection refused|Connection timed out|connection abort|Broken pipe|connect to|"
        r"Call to (?:connect|recv|send|accept) failed|"
        r"(?P<local>Call to (?:bind|listen|socket|getsockname)\b.*failed|Socket creation failed\b.*)|"
        r"socket(?:Progress(?:Opt)?|Poll\w*|StartConnect|FinalizeAccept|Connect|Accept|Listen)\b|Socket recv failed|"
        r"Socket Timeout|Net : |(?<=socket\.)(?:cc|h):\d+ (?:NCCL )?WARN .*failed\s*:\s*\w|"
        rf"NET/(?!Plugin)\w+\s*:?\s(?!.*{_PLUGIN_INIT_FAILED}).*(?:error|failed|closed|timeout|unable|couldn't|"
        r"could not)|ibv_\w+|"
        r"IBV_WC_\w+|Got completion|transport retry counter exceeded|fi_\w+|No route to host|"
        r"Network is unreachable|Message truncated))|"
        r"(?P<remote>remote process exited or there was a network error|ncclRemoteError)|"
        # No interface to open a socket on (none matches NCCL_SOCKET_IFNAME): a WARN, or NCCL's own words anywhere, as
        # after `Last error:` behind any launcher's prefix.
        r"(?:NCCL WARN .*?|\.(?:cc|cu|h|c):\d+ WARN .*?)(?P<interface>[Nn]o (?:socket )?interface found.*)|"
        r"(?P<no_interface>Bootstrap\s*:\s*no socket interface found.*|ncclSocket\w*\s*:.*\bneither AF_INET\b.*)|"
        # NCCL 2.19+ repeats the cause after `Last error:` in the exception, on its own line or glued to it: one of its
        # socket or proxy messages with no prefix of its own.
        # NCCL 2.14-2.18 put it in the same sentence: `ncclInternalError: Internal check failed. Proxy Call to ...`.
        r"(?:Last error:\W*(?:\d+:\s*)?|^\W*|Internal check failed\.\s*)"
        r"(?P<cause>socket(?:StartConnect|PollConnect|Progress(?:Opt)?|FinalizeAccept)\b.*"
        r"|Net\s*:\s*(?:Connection (?:closed|reset|refused|timed out)|Call to \w+\b.*failed)\b.*"
        r"|\[Service thread\] Error encountered progressing operation=Connect\b.*"
        r"|Proxy Call to rank \d+ failed \(Connect\).*)|"
        # An IB work completion that failed, in any plugin's tag (NET/IB, NET/IBext, NET/IBP), quoted anywhere.
        r"(?P<completion>NET/IB\w*\s*:\s*Got completion (?:from peer \S+ )?with (?:status=|error )\d+.*)|"
        # Gloo's pair connecting to a peer's advertised address (PyTorch 1.0 aborts on the uncaught gloo::IoException).
        r"gloo.*(?P<gloo>Connection closed by peer|Connection reset by peer"
        r"|\bconnect \[[^\]]+\]:\d+: (?:Connection refused|No route to host|Connection timed out))"
        r"|(?P<gloo_mesh>Gloo connectFullMesh failed\b.*)"
        # NCCL 2.19+ counts its INFO-level connect retries (`retrying (34/34)`): the last one failing means it gave up.
        r"|NCCL INFO (?:socket\w*:\s*)?(?P<retries_exhausted>(?:[Cc]all to )?connect returned [^,]+, "
        r"retrying \((?P<attempt>\d+)/(?P=attempt)\).*)",
        [
            "h1:22:31 [2] NCCL WARN NET/Socket : Connection closed by remote peer 10.0.0.7<45678>",
            "h2:1:2 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer h3<4000>",
            "h2:1:2 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.1.0.2<1> "
            "with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.0.1",
            "h4:9:9 [0] NCCL WARN Bootstrap : no socket interface found",
            "h5:3:4 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed : "
            "Software caused connection abort",
            "h6:5:6 [0] misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong type 4 != 3",
            "node-a [0] include/socket.h:185 WARN Call to connect failed : Connection refused",
            "h7:8:8 [0] transport/net_ib.cu:781 WARN NET/IB : Got completion with error 12, opcode 1, len0, "
            "vendor err 129",
            "algo-1:1:2 [0] ofi_process_cq:999 NCCL WARN NET/OFI Request completed with error. RC: 21. Error: unknown",
            "torch.distributed.DistBackendError: NCCL error: remote process exited or there was a network error",
            "socketStartConnect: Connect to 127.0.0.1<45069> failed : Software caused connection abort",
            "socketProgressOpt: Call to recv from 10.0.0.4<33759> failed : Connection reset by peer",
            "nd20-01:275975:275975 [0] misc/socket.cc:379 NCCL WARN Call to bind failed : Cannot assign requested "
            "address",
            "h8:1:1 [0] misc/socket.cc:420 NCCL WARN socketListen: Call to listen failed : Address already in use",
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
            "[10.0.0.3]:62110",
            "node-a:17283:17549 [3] include/socket.h:371 WARN Connection closed by remote peer",
            "include/socket.h:344 WARN Socket creation failed : Address family not supported by protocol",
            "NET/IBP:Got completion from peer 10.6.13.83<36315> with status=12 opcode=32698 len=32696 vendor err 129 "
            "(Send)",
            "Net : Connection closed by remote peer user<50260>",
            "[Service thread] Error encountered progressing operation=Connect, res=3, closing connection",
            "Proxy Call to rank 0 failed (Connect)",
            "### ncclInternalError: Internal check failed. Proxy Call to rank 0 failed (Connect)",
            "[rank0]: Bootstrap : no socket interface found",
            "ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)",
            "  what():  [/opt/conda/conda-bld/pytorch_1544084119927/work/third_party/gloo/gloo/transport/tcp/"
            "pair.cc:724] connect [127.0.1.1]:3210: Connection refused",
            "ERROR 05-29 04:08:22 worker_base.py:145] RuntimeError: Gloo connectFullMesh failed with "
            "[../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
            "WARN: Function: create_nccl_ofi_component Line: 459: NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid "
            "argument",
            "h9:3:4 [0] NCCL INFO socketPollConnect: connect returned No route to host, retrying (34/34) after sleep "
            "for 3400 msec",
        ],
    ),
    pattern(
        SYSTEM_ERROR,
        ["unhandled system error", "ncclSystemError"],
        r"unhandled system error|ncclSystemError",
        [
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1691, unhandled system "
            "error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3",
        ],
    ),
    pattern(
        LOCAL_SETUP_FAILURE,
        ["shm_open failed", "creating shared memory segment", "Could not find real path of"],
        r"NCCL WARN (?P<local>Call to shm_open failed\b.*|Error while creating shared memory segment\b.*"
        r"|Could not find real path of \S+)",
        [
            "node08:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied",
            "node08:27106:27302 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment "
            "nccl-shm-recv-b7948f403864987a-0-3-0 (size 4460544)",
            "h1:430:2237 [0] include/topo.h:27 NCCL WARN Could not find real path of "
            "/sys/class/pci_bus/0000:02/../../0000:02:00.0",
        ],
    ),
    pattern(
        DUPLICATE_GPU,
        ["Duplicate GPU detected"],
        r"Duplicate GPU detected : rank (?P<rank>\d+) and rank (?P<other>\d+) both on CUDA device",
        ["h1:1:1 [0] init.cc:729 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000"],
    ),
    # The bootstrap root heard from one rank twice: two processes (often two nodes) were given the same rank.
    pattern(
        RANK_CHECKED_IN_TWICE,
        ["has already checked in"],
        r"Bootstrap Root : rank (?P<rank>\d+) of (?P<nranks>\d+) ranks has already checked in",
        ["hpc-1:18569:18835 [0] bootstrap.cc:131 NCCL WARN Bootstrap Root : rank 1 of 8 ranks has already checked in"],
    ),
)
