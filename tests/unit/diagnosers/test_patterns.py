"""Every line pattern's examples are found by its needles and parsed by its regex (ruff-style fixtures)."""

import io

import pytest

from diagnosers.logscan import RegexMatcher
from diagnosers.parsers.frameworks import ray_log
from diagnosers.parsers.logs import LINE_PATTERNS, LogParser
from diagnosers.parsers.platform import kernel, nccl

EXAMPLES = [(pattern.kind, example) for pattern in LINE_PATTERNS for example in pattern.examples]


@pytest.fixture(scope="module")
def parser():
    return LogParser()


@pytest.mark.parametrize(("kind", "example"), EXAMPLES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(EXAMPLES)])
def test_example_line_gives_its_signal_through_the_scanner(parser, kind, example):
    log = f"unrelated line before\n{example}\nunrelated line after\n".encode()
    parsed = parser.parse("logs/x.log", io.BytesIO(log))
    kinds = {signal.kind for signal in parsed.signals}
    assert kind in kinds
    assert all(signal.quote.line == 2 for signal in parsed.signals if signal.kind == kind)


@pytest.mark.parametrize(("kind", "example"), EXAMPLES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(EXAMPLES)])
def test_example_line_gives_its_signal_from_a_json_string(parser, kind, example):
    assert kind in {signal.kind for signal in parser.parse_text("k8s/events.json", 7, example)}


def test_regex_fallback_finds_the_same_lines_as_hyperscan(parser):
    log = "\n".join(example for _, example in EXAMPLES).encode()
    fallback = LogParser()
    fallback._scanner._matcher = RegexMatcher(fallback._scanner._needles)
    fast = parser.parse("a.log", io.BytesIO(log))
    slow = fallback.parse("a.log", io.BytesIO(log))
    assert [(s.kind, s.quote.line) for s in fast.signals] == [(s.kind, s.quote.line) for s in slow.signals]


HARMLESS = [
    "Reducing batch size to avoid CUDA out of memory errors later",
    # Source code pasted around a log, naming errors it would raise or catch.
    'raise ValueError("invalid device ordinal")',
    "except torch.cuda.OutOfMemoryError:",
    "View the dashboard at http://127.0.0.1:8265",
    "[default] Rendezvous complete for workers. Result:",
    "NCCL_P2P_DISABLE set by environment to 0",
    "CUDA available: True",
    '  Normal   Pulled     2m    kubelet  Successfully pulled image "rayproject/ray:2.9.0-gpu"',
    "Demands:\n (no resource demands)",
    "mlflow.tracking: logged metric loss=0.3 to run 1234",
    # c10d trying IPv6 for `localhost` on a host without it, then connecting over IPv4
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 97 - Address "
    "family not supported by protocol).",
    # TensorFlow's allocator asking for more than it needs: a hint about speed, not an OOM.
    "2021-11-16 11:33:53.139338: W tensorflow/core/common_runtime/bfc_allocator.cc:272] Allocator (GPU_0_bfc) ran out "
    "of memory trying to allocate 2.18GiB with freed_by_count=0. The caller indicates that this is not a failure, but "
    "may mean that there could be performance gains if more memory were available.",
    # Ray's core worker on an actor killed on purpose (ray.kill, the job's end), and the queue it then empties
    "[2021-09-14 10:11:20,566 I 2122527 2122927] actor_manager.cc:139: received notification on actor, state: DEAD, "
    "actor_id: b725bb, ip address: 10.0.0.5, port: 35795, worker_id: a8a073, raylet_id: dc116a, num_restarts: 0, "
    "has creation_task_exception=0",
    "[2021-09-14 10:11:20,566 I 2122527 2122927] direct_actor_transport.cc:209: Failing pending tasks for actor "
    "b725bbfcae78f2913c44e16a01000000 because the actor is already dead.",
    # the raylet's warning that a lagging heartbeat could get the node marked dead
    "[2022-02-16 12:45:07,907 W 149 199] node_manager.cc:157: Last heartbeat was sent 6901 ms ago. There might be "
    "resource pressure on this node. If heartbeat keeps lagging, this node can be marked as dead mistakenly.",
]


@pytest.mark.parametrize("line", HARMLESS)
def test_harmless_lines_give_no_signal(parser, line):
    assert parser.parse("a.log", io.BytesIO(line.encode())).signals == []


WRAPPED = [
    # a terminal 45 columns wide cuts inside a word
    [
        "Error: No available node types can fulfill re",
        "source request {'GPU': 4.0}. Add suitable node types to ",
        "this cluster to resolve this issue.",
    ],
    # a paster re-wraps at word boundaries and drops the space
    [
        "(autoscaler +8m46s) Error: No available node types can fulfill resource request",
        "defaultdict(<class 'float'>, {'CPU': 9.0, 'GPU': 1.0}). Add suitable node types to this cluster.",
    ],
    # Ray 1.x ends the line at `request:`; every physical line carries mpirun's prefix
    [
        "[1,0]<stdout>:2021-03-08 13:22:17,520\tWARNING resource_demand_scheduler.py:643 -- The autoscaler could not "
        "find a node type to satisfy the request:",
        "[1,0]<stdout>: [{'GPU': 8.0}]",
    ],
]


@pytest.mark.parametrize("lines", WRAPPED)
def test_a_wrapped_message_is_read_joined_and_quotes_its_first_line(parser, lines):
    log = "\n".join(["unrelated line before", *lines, "unrelated line after"]).encode()
    signals = [s for s in parser.parse("a.log", io.BytesIO(log)).signals if s.kind == ray_log.INFEASIBLE_DEMAND]
    assert [(signal.quote.line, signal.quote.text) for signal in signals] == [(2, lines[0])]
    assert "'GPU'" in signals[0].get("demand")


RAYLET_TERMINATED = (
    "2022-10-17 14:23:59,720 WARNING worker.py:1839 -- Raylet is terminated: ip=10.0.0.7, id=c28cee44. Termination is "
    "unexpected. Possible reasons include: (1) SIGKILL by the user or system"
)


@pytest.mark.parametrize(
    ("log", "line"),
    [
        # the terminal broke the message: the list of reasons goes on below the line that names the raylet
        (RAYLET_TERMINATED + "\nOOM killer, (2) Invalid memory access from Raylet causing SIGSEGV or SIGBUS\n", 1),
        # a message that ended leaves the next line its own
        (RAYLET_TERMINATED + ".\nOOM killer, (2) Invalid memory access from Raylet causing SIGSEGV or SIGBUS\n", 2),
        # and so does a line that starts a record of its own
        (RAYLET_TERMINATED + "\n2022-10-17 14:24:00,000 ERROR -- *** SIGSEGV received at time=1700000000 ***\n", 2),
    ],
)
def test_a_match_on_a_wrapped_messages_continuation_quotes_its_first_line(parser, log, line):
    signals = [s for s in parser.parse("a.log", io.BytesIO(log.encode())).signals if s.kind == kernel.PROCESS_CRASH]
    assert [signal.quote.line for signal in signals] == [line]
    assert signals[0].quote.text == log.splitlines()[line - 1]


@pytest.mark.parametrize(
    ("log", "lines"),
    [
        # a blank line ends the message
        ("Error: No available node types can fulfill resource request \n\n{'GPU': 4.0}\n", []),
        # a match that begins on the next line belongs to that line, not to the first
        (
            "could not find a node type for the report\nWarning: The following resource request cannot be scheduled "
            "right now: {'GPU': 8.0}.\n",
            [2],
        ),
    ],
)
def test_lines_are_joined_only_within_one_message(parser, log, lines):
    signals = parser.parse("a.log", io.BytesIO(log.encode())).signals
    assert [signal.quote.line for signal in signals if signal.kind == ray_log.INFEASIBLE_DEMAND] == lines


def test_nccl_lines_pasted_into_one_are_read_one_message_at_a_time(parser):
    line = (
        "gpu-a:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.5<0> gpu-b:3:4 [0] NCCL INFO Bootstrap : Using "
        "eth0:10.0.0.6<0> gpu-b:3:4 [0] NCCL INFO NET/IB : No device found. [0] NCCL INFO Using network Socket"
    )
    signals = parser.parse("a.log", io.BytesIO(f"before\n{line}\n".encode())).signals
    assert {signal.get("host") for signal in signals if signal.kind == nccl.HOST_SEEN} == {"gpu-a", "gpu-b"}
    by_kind = {signal.kind: signal for signal in signals}
    assert by_kind[nccl.NETWORK].get("network") == "Socket"
    assert by_kind[nccl.FAST_NET_MISSING].get("host") == "gpu-b"
    assert {(signal.quote.line, signal.quote.text) for signal in signals} == {(2, line)}
