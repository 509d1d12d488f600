"""PyTorch distributed: ProcessGroupNCCL watchdog, c10d store and rendezvous errors.

The watchdog line changed over releases: 1.x prints `[E ProcessGroupNCCL.cpp:587] [Rank 3]
Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000)`;
2.x adds `[rank3]:` and SeqNum/NumelIn; older builds print `Caught collective operation
timeout` without the word Watchdog. Numbers are optional groups so every form matches.
The ranks that did not time out themselves say so in other words: `Some NCCL operations have failed
or timed out` (1.8+), `Timeout at NCCL work: N` and `Received a dump signal due to a collective timeout`
(2.4+).
c10d's TCPStore client says in several verbs that it cannot reach the store: `has failed to connect to any
network address`, `has timed out after 600s while trying to connect to`, the server's `has failed to listen on any
local network address`, and before them each retry's `has failed to connect to [host]:port (errno: 111 - ...)`.
A paste may hold only the watchdog's C++ stack: `c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout` and `Exception
raised from checkTimeout` are the timeout's own; `watchdogHandler` and `ncclCommWatchdog` frames are not, the
watchdog rethrows CUDA and NCCL errors through them too (pytorch#126544, vllm#2682).
"""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

COLLECTIVE_TIMEOUT = "torch.collective-timeout"
WATCHDOG_HANG = "torch.watchdog-hang"
WATCHDOG_TIMEOUT_FRAME = "torch.watchdog-timeout-frame"
RENDEZVOUS_FAILED = "torch.rendezvous-failed"
# One failed attempt of c10d's client socket, which retries until its timeout: alone it is only a warning.
RENDEZVOUS_RETRY = "torch.rendezvous-retry"
ENV_NOT_SET = "torch.env-not-set"
INVALID_RANK = "torch.invalid-rank"
INVALID_DEVICE_ORDINAL = "torch.invalid-device-ordinal"

# What torchrun/torch.distributed.launch export; a script that reads os.environ[...] without a launcher
# raises KeyError on the first one.
_LAUNCHER_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")

PATTERNS = (
    pattern(
        COLLECTIVE_TIMEOUT,
        [
            "collective operation timeout",
            "Timed out waiting",
            "before timing out",
            "timed out in blocking wait",
            "have failed or timed out",
            "due to a collective timeout",
            "Timeout at NCCL work",
        ],
        r"[Cc]aught collective operation timeout:?\s*(?:WorkNCCL\((?:SeqNum=(?P<seq>\d+),\s*)?"
        r"(?:OpType=(?P<op>\w+))?(?:[^)]*?Timeout\(ms\)=(?P<timeout_ms>\d+))?)?"
        r"|(?:Work\w+|operation)\b.*ran for (?P<ran_ms>\d+) milliseconds before timing out"
        r"|Timed out waiting (?P<wait_ms>\d+)ms for (?P<gloo_op>send|recv) operation to complete"
        r"|timed out in blocking wait"
        # What the other ranks print (NCCL_ASYNC_ERROR_HANDLING since 1.8, flight recorder since 2.4) when
        # the watchdog line itself is in another rank's log or was cut from the paste.
        r"|Some NCCL operations have failed or timed out|Timeout at NCCL work: (?P<work>\d+)"
        r"|dump signal due to a collective timeout",
        [
            "[E ProcessGroupNCCL.cpp:587] [Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1806405 milliseconds before timing out.",
            "[rank7]:[E1122 10:42:17.123456 1234 ProcessGroupNCCL.cpp:616] [Rank 7] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
            "Timeout(ms)=600000) ran for 600043 milliseconds before timing out.",
            "[E ProcessGroupNCCL.cpp:414] Caught collective operation timeout: WorkNCCL(OpType=BROADCAST, "
            "Timeout(ms)=1800000) ran for 1800034 milliseconds before timing out.",
            "RuntimeError: [/opt/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv "
            "operation to complete",
            "RuntimeError: [Rank 1] Work WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=1800000) timed out in "
            "blocking wait (TORCH_NCCL_BLOCKING_WAIT=1).",
            "[E ProcessGroupNCCL.cpp:341] Some NCCL operations have failed or timed out. Due to the asynchronous "
            "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
            "[rank0]:[E1206 18:44:16.994 ProcessGroupNCCL.cpp:1709] [PG 1 Rank 0] Timeout at NCCL work: 7753, last "
            "enqueued NCCL work: 7755, last completed NCCL work: 7752.",
            "[rank5]:[E901 05:20:03.11 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 5] Received a "
            "dump signal due to a collective timeout from  rank 34 and we will try our best to dump the debug info.",
        ],
    ),
    pattern(
        WATCHDOG_TIMEOUT_FRAME,
        ["checkTimeout"],
        r"\bc10d::ProcessGroupNCCL::WorkNCCL::checkTimeout\b|\bException raised from checkTimeout\b",
        [
            "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
            "std::ratio<1l, 1000l> > >) + 0x1d2 (0x1554e9e0f8f2 in /opt/conda/lib/python3.11/site-packages/torch/lib/"
            "libtorch_cuda.so)",
            "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565 (most "
            "recent call first):",
        ],
    ),
    pattern(
        WATCHDOG_HANG,
        ["watchdog got stuck", "Heartbeat monitor timed out", "watchdog thread seems stuck"],
        r"watchdog got stuck for (?P<stuck_s>\d+) seconds|Heartbeat monitor timed out|watchdog thread seems stuck",
        [
            "[rank0]:[E1013 04:11:52 ProcessGroupNCCL.cpp:1295] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
            "Heartbeat monitor timed out! Process will be terminated after dumping debug info.",
            "[rank2]:[F ProcessGroupNCCL.cpp:1224] [Rank 2] [PG 0 Rank 2] ProcessGroupNCCL's watchdog got stuck "
            "for 480 seconds without making progress in monitoring enqueued collectives.",
        ],
    ),
    pattern(
        RENDEZVOUS_FAILED,
        [
            "Rendezvous",
            "rendezvous",
            "DistStoreError",
            "clients joined",
            "while trying to connect to",
            "failed to listen on",
            "DistNetworkError",
            "store based barrier",
            "to any network address",
            "host not found",
            "RuntimeError: Connection",
            "RuntimeError: Address already in use",
            "Unable to find address for",
            "connect() timed out",
            "DistStoreError",
            "Socket Timeout",
            "retrieving ncclUniqueId",
            "Default process group has not been initialized",
            "Wait timeout after",
            "HTTP GET request failed",
        ],
        r"(?P<error>Rendezvous(?:Timeout|Connection|Closed|State)?Error\b.*"
        r"|Error initializing torch\.distributed using \S+ rendezvous.*"
        r"|[Rr]endezvous\b.*\b(?:fail\w*|timed out|error)\b.*"
        r"|Timed out after \d+ seconds waiting for clients\. \d+/\d+ clients joined.*"
        r"|socket has timed out after \d+m?s while trying to connect to.*"
        r"|failed to connect to any network address.*|\bhost not found: .*|Unable to find address for: .*"
        # PyTorch <= 1.0's THD backend appends its source location; a paste in markdown italics ends in `_`.
        r"|\bRuntimeError: (?:Connection (?:refused|timed out)|Address already in use)(?: at \S+)?[_*`]*\s*$"
        r"|failed to listen on any local network address.*"
        r"|DistNetworkError: .*|Timed out initializing process group in store based barrier.*"
        # The TCPStore client of PyTorch <= 1.10 (`connect() timed out. Original timeout was 60000 ms.`) and its
        # store operations (`Socket Timeout`, 2.4's `DistStoreError: wait timeout after 100ms, keys: ...`).
        r"|\bconnect\(\) timed out\b.*|\bRuntimeError: Socket Timeout\b.*|DistStoreError: .*"
        # The store's error wrapped by the caller that re-raised it (Ray: `RayTaskError(DistStoreError)`).
        r"|\w+Error\(DistStoreError\).*"
        # A rank that never got rank 0's NCCL id through the store (rank 0 absent, crashed or elsewhere), and a
        # collective in a script started without any process group (plain `python` instead of a launcher).
        r"|retrieving ncclUniqueId from \[\d+\] via c10d key-value store.*got error: .*"
        r"|Default process group has not been initialized.*"
        # Horovod's gloo rendezvous (an HTTP store on the driver, also under Ray): a rank that never got the others'
        # keys, or could not reach the store at all.
        r"|Wait timeout after \d+ seconds for key\(s\): .*|HTTP GET request failed too many times.*)",
        [
            "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
            "RuntimeError: Timed out initializing process group in store based barrier on rank: 3, for key: "
            "store_based_barrier_key:1 (world_size=8, worker_count=4, timeout=0:30:00)",
            "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
            "torch.distributed.DistNetworkError: The client socket has timed out after 1800000ms while trying to "
            "connect to (10.0.0.1, 29500).",
            "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable "
            "MASTER_ADDR expected, but not set",
            "[E socket.cpp:753] [c10d] The client socket has failed to connect to any network address of "
            "(6841231, 47389).",
            "[E socket.cpp:793] [c10d] The client socket has timed out after 60s while trying to connect to "
            "(IP1, 2222).",
            "ValueError: host not found: Name or service not known",
            "RuntimeError: Connection timed out",
            "RuntimeError: Address already in use at /pytorch/torch/lib/THD/process_group/General.cpp:20",
            "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:127] rp != nullptr. "
            "Unable to find address for: dgx-1.ai",
            "RuntimeError: connect() timed out. Original timeout was 60000 ms.",
            "  what():  connect() timed out",
            "RuntimeError: Socket Timeout",
            "torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /default_pg/0//cuda//0",
            "ray.exceptions.RayTaskError(DistStoreError): ray::_Inner.train() (pid=9544, ip=10.0.0.2, "
            "repr=TorchTrainer)",
            "RuntimeError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value "
            "store by key '0', but store->get('0') got error: Socket Timeout",
            "RuntimeError: Default process group has not been initialized, please make sure to call "
            "init_process_group.",
            "  what():  [/tmp/horovod/common/gloo/http_store.cc:57] [/tmp/horovod/common/gloo/http_store.cc:57] Wait "
            "timeout after 30 seconds for key(s): 0. You may want to increase the timeout via "
            "HOROVOD_GLOO_TIMEOUT_SECONDS",
            "[2021-03-26 08:37:42.910981: E /tmp/horovod/common/gloo/http_store.cc:96] HTTP GET request failed too "
            "many times, aborting. See exception message above.",
        ],
    ),
    # A Ray worker node joining a head whose address came from an unset variable (`ray start --address=$HEAD:6379`
    # with HEAD empty): the GCS address has a port and no host, so the node can never join the cluster.
    pattern(
        RENDEZVOUS_FAILED,
        ["connect to GCS at"],
        r"(?P<error>(?:Failed|Unable) to connect to GCS at (?:address )?:\d+\b.*)",
        [
            "[2025-07-23 10:05:49,679 W 51000 51000] gcs_rpc_client.h:151: Failed to connect to GCS at address :6379 "
            "within 5 seconds.",
        ],
    ),
    pattern(
        RENDEZVOUS_RETRY,
        ["socket has failed to connect to"],
        # errno 22 and 97 (and WinSock's 10047) are the attempt on an address family the host lacks (IPv6 for
        # `localhost`); the socket goes on to the next address, so they say nothing about the store.
        r"(?P<error>client socket has failed to connect to (?!any network address)\S+"
        r" \((?:errno|system error): (?!(?:22|97|10047)\b)\d+\b.*)",
        [
            "[W ..\\torch\\csrc\\distributed\\c10d\\socket.cpp:601] [c10d] The client socket has failed to connect "
            "to [kubernetes.docker.internal]:12345 (system error: 10049 - unknown error).",
            "[W socket.cpp:663] [c10d] The client socket has failed to connect to [master-0]:29500 (errno: 111 - "
            "Connection refused).",
        ],
    ),
    pattern(
        ENV_NOT_SET,
        ["expected, but not set", *(f"KeyError: '{name}'" for name in _LAUNCHER_VARIABLES)],
        r"environment variable (?P<variable>\w+) expected, but not set"
        rf"|KeyError: '(?P<key>{'|'.join(_LAUNCHER_VARIABLES)})'",
        [
            "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK "
            "expected, but not set",
            "KeyError: 'RANK'",
        ],
    ),
    pattern(
        INVALID_RANK,
        ["nvalid rank", "rank mismatch", "world_size mismatch", "world size mismatch", "Invalid rank"],
        r"(?P<error>[Ii]nvalid rank\b.*|rank mismatch.*|world[_ ]size mismatch.*)",
        [
            "RuntimeError: Invalid rank 4, rank should be in the interval [0, 3]",
            "h1:1:1 [0] NCCL WARN Invalid rank requested : 8/8",
        ],
    ),
    # A rank asking for a GPU index the process cannot see: more ranks per node than GPUs, or LOCAL_RANK used
    # against a CUDA_VISIBLE_DEVICES that already narrowed the devices; CUDA, NCCL and TF say it alike.
    pattern(
        INVALID_DEVICE_ORDINAL,
        ["invalid device ordinal", "cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE"],
        r"(?P<error>(?:CUDA error: |Cuda failure '|cuda runtime error \(\d+\) : |cudaErrorInvalidDevice: )"
        r"invalid device ordinal|cudaErrorInvalidDevice|CUDA_ERROR_INVALID_DEVICE)",
        [
            "RuntimeError: CUDA error: invalid device ordinal",
            "RuntimeError: cuda runtime error (10) : invalid device ordinal at /pytorch/torch/csrc/cuda/Module.cpp:32",
            "node1:1234:1234 [4] NCCL WARN Cuda failure 'invalid device ordinal'",
            "tensorflow.python.framework.errors_impl.InternalError: cudaSetDevice() on GPU:4 failed. Status: "
            "cudaErrorInvalidDevice: invalid device ordinal",
        ],
    ),
)
