"""JAX's distributed runtime: `jax.distributed.initialize` and the coordination service behind it.

Process 0 runs a coordination service (XLA's, formerly TensorFlow's, over gRPC) that every process registers with
and then waits at a connect barrier for all of them. When a process never starts, has the wrong
`num_processes`/`process_id` or cannot reach `coordinator_address`, the others fail in these words (JAX 0.3 to
0.4+): `DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: PjRT_Client_Connect. Timed out task names:` (later `Id:`),
`DEADLINE_EXCEEDED: Connect() timed out after ...`, a gRPC error while calling `CoordinationService/RegisterTask`,
`UNAVAILABLE: ... coordination service`; newer XLA (2024+) names the registration barrier
(`Barrier timed out. Id: [Init]Wait_for_all_tasks_to_register::0`) and says `Stopping coordination service as cluster
registration failed`. The same service reports tasks that die later on (`heartbeat timeout`,
`Failed to send RPC ... preempted/died`): those name a consequence, not the rendezvous, and are left out.
"""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

COORDINATION_FAILED = "jax.coordination-failed"

PATTERNS = (
    pattern(
        COORDINATION_FAILED,
        [
            "PjRT_Client_Connect",
            "Timed out task names",
            "Connect() timed out after",
            "CoordinationService/RegisterTask",
            "coordination service",
            "Coordination service",
            "Wait_for_all_tasks_to_register",
            "cluster registration failed",
        ],
        r"(?P<error>Barrier timed out\..*\b(?:PjRT_Client_Connect|Wait_for_all_tasks_to_register)\b.*"
        r"|Barrier timed out\..*Timed out task names.*|.*\bcluster registration failed\b.*"
        r"|DEADLINE_EXCEEDED: Connect\(\) timed out after .*"
        r"|.*calling /tensorflow\.CoordinationService/RegisterTask\b.*"
        r"|[Ff]ailed to connect to (?:the )?coordination service.*"
        r"|(?:UNAVAILABLE|DEADLINE_EXCEEDED): (?!.*(?:heartbeat|preempted|died|Failed to send RPC))"
        r".*\b[Cc]oordination service\b.*)",
        [
            "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
            "PjRT_Client_Connect. Timed out task names:",
            "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Connect() timed out after 0 with 1 attempts.",
            "Additional GRPC error information from remote target unknown_target_for_coordination_leader while "
            "calling /tensorflow.CoordinationService/RegisterTask:",
            # The shape of the gRPC status when the coordinator's port does not answer.
            "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: Failed to connect to coordination service at "
            "10.0.0.4:1234",
            "Original error: DEADLINE_EXCEEDED: Barrier timed out. Id: [Init]Wait_for_all_tasks_to_register::0. This "
            "usually happens because a task triggered the barrier too early or too slowly.",
            "Stopping coordination service as cluster registration failed. This may be due to 1) some tasks crashed "
            "earlier before connecting, 2) some tasks were never scheduled, or 3) scheduling delays.",
        ],
    ),
)
