"""Ray's own messages: the memory monitor, dead actors, workers and raylets, jobs, demands, the dashboard."""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

MEMORY_MONITOR_KILL = "ray.memory-monitor-kill"
ACTOR_DIED = "ray.actor-died"
NODE_DIED = "ray.node-died"
JOB_FAILED = "ray.job-failed"
# What `ray job submit` / `ray job status` print under the job's state: why it failed, where it did.
JOB_STATUS_MESSAGE = "ray.job-status-message"
RESOURCE_DEMAND = "ray.resource-demand"
INFEASIBLE_DEMAND = "ray.infeasible-demand"
DASHBOARD_UNREACHABLE = "ray.dashboard-unreachable"
# A job-submission client naming the dashboard it is about to call, and saying that the call went through.
JOB_SUBMIT_ADDRESS = "ray.job-submit-address"
JOB_SUBMITTED = "ray.job-submitted"
# A traceback frame in Ray's job-submission client (`ray job submit`, JobSubmissionClient), read line by line so a
# traceback cut before its exception still shows whose call it was.
SUBMISSION_CLIENT_FRAME = "ray.submission-client-frame"
# A traceback frame where urllib3 opens a connection, read line by line: below a `ray job submit` line, a traceback
# cut before its exception that already stands there is the client failing to reach the dashboard.
HTTP_CONNECT_FRAME = "ray.http-connect-frame"

_DEMAND = r"(?P<demand>\{[^{}]*\})"

PATTERNS = (
    pattern(
        MEMORY_MONITOR_KILL,
        [
            "running low on memory",
            "exceeds the memory usage threshold",
            "killed due to memory pressure",
            "ray.exceptions.OutOfMemoryError",
            "kill details",
            "exceeded threshold of",
            "address the out of memory issue",
            "Workers (tasks /",
            "Memory on the node (IP: ",
        ],
        r"(?P<what>Task was killed due to the node running low on memory"
        r"|[1-9]\d* worker\(s\) were killed due to the node running low on memory"
        r"|Killing [1-9]\d* worker\(s\), kill details"
        r"|Memory usage \d+B exceeded threshold of \d+B"
        r"|which exceeds the memory usage threshold of [\d.]+"
        r"|\b[1-9]\d* Workers? \(tasks / actors\) killed due to memory pressure \(OOM\)"
        r"|ray\.exceptions\.OutOfMemoryError"
        # The advice closing the kill report: a paste of a job's truncated log tail may keep only this.
        r"|Refer to the documentation on how to address the out of memory issue: \S*ray-oom-prevention"
        # The monitor's own report, which Ray prints on a line of its own under the exception: a paste may keep
        # only that line.
        r"|Memory on the node \(IP: [\d.]+, ID: \w+\) where the (?:task|actor|lease)\b)"
        r"(?:.*?Memory on the node \(IP: (?P<ip>[\d.]+))?",
        [
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
            "Memory on the node (IP: 10.0.0.5, ID: 7f3) where the task (task ID: 2b, name=train, pid=311, memory "
            "used=28.1GB) was running was 30.11GB / 31.35GB (0.960481), which exceeds the memory usage threshold "
            "of 0.95.",
            # Ray 2.60's raylet.out
            "[2026-11-22 15:30:01,123 I 5123 5123] (raylet) node_manager.cc:2960: Killing 1 worker(s), kill "
            "details: Memory on the node (IP: 127.0.0.1, ID: 9e1) where the lease was running was 9.52GB / 23.5GB",
            "[2026-11-22 15:30:01,123 I 5123 5123] (raylet) memory_monitor.cc:120: OOM kill reason: Memory usage "
            "10223616000B exceeded threshold of 10094327808B (40.0% of 25235819520B limit)",
            "1 worker(s) were killed due to the node running low on memory. Memory on the node (IP: 10.0.0.5)",
            "(raylet) [2024-05-01 10:00:00,000 E 1 1] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) "
            "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 3fa, IP: "
            "10.0.0.5) over the last time period.",
            "(ActorModelRayActor pid=8249) Refer to the documentation on how to address the out of memory issue: "
            "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more",
            "Memory on the node (IP: 10.1.180.84, ID: ba65c8) where the task (task ID: d221d2, name=head, rank=0,, "
            "pid=4503, memory used",
        ],
        # The raylet's summary is one long line that syslog or a terminal breaks, often inside `(tasks / actors)`.
        wraps=True,
    ),
    pattern(
        ACTOR_DIED,
        [
            "ActorDiedError",
            "RayActorError",
            "WorkerCrashedError",
            "actor died",
            "worker died or was killed",
            "Worker exit type: SYSTEM_ERROR",
            "worker process has died",
            "Workers crashed due to other reasons",
            "LocalRayletDiedError",
            "RayletError",
            "OwnerDiedError",
            "lost due to node failure",
            "local raylet died",
            "state: DEAD",
            "RayWorkerError",
        ],
        r"(?P<what>ray\.exceptions\.(?:ActorDiedError|RayActorError|WorkerCrashedError|LocalRayletDiedError|RayletError)\b"
        # A task that raised because the actor it called died, and an object lost with the worker or node that held
        # it (its owner exited, or every copy was on a node that failed).
        r"|RayTaskError\((?:ActorDiedError|RayActorError|WorkerCrashedError)\)"
        r"|ray\.exceptions\.OwnerDiedError\b|ObjectLostError: .*lost due to node failure"
        r"|The task's local raylet died"
        r"|The actor died (?:unexpectedly|because)|(?:A )?worker died or was killed while executing"
        r"|Worker exit type: SYSTEM_ERROR|worker process has died"
        r"|\b[1-9]\d* Workers crashed due to other reasons"
        # Ray <= 0.8 named WorkerCrashedError `RayWorkerError`.
        r"|ray\.exceptions\.RayWorkerError\b"
        # The core worker's own log (`[date I pid tid] actor_manager.cc:N:`): an actor dead because its constructor or
        # its runtime env failed (Ray 1.x: `has creation_task_exception=1`, 2.x: its death context). Any other DEAD
        # notification, and the `Failing pending tasks for actor` line after it, also follow an actor killed on
        # purpose (ray.kill, the job's end).
        r"|received notification on actor, state: DEAD\b.*?(?:has creation_task_exception=1"
        r"|death context type=(?:CreationTaskFailure|RuntimeEnvFailed)Context))",
        [
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
            "ray.exceptions.RayTaskError(ActorDiedError): ray::TrainTrainable.train() (pid=123, ip=10.0.0.5, "
            "actor_id=abc, repr=TorchTrainer)",
            "ray.exceptions.OwnerDiedError: Failed to retrieve object 00ff. The object's owner has exited.",
            "ray.exceptions.ObjectLostError: Failed to retrieve object 00ff. All copies of 00ff are lost due to node "
            "failure.",
            "ray.exceptions.RayWorkerError: The worker died unexpectedly while executing this task.",
            "(raylet) A worker died or was killed while executing a task by an unexpected system error. To "
            "troubleshoot the problem, check the logs for the dead worker.",
            "\tclass_name: RayTrainWorker Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly "
            "exits with a connection error code 2.",
            "ray.exceptions.LocalRayletDiedError: The task's local raylet died. Check raylet.out for more information.",
            "(pid=41720) ray.exceptions.RayletError: The Raylet died with this message: [RayletClient] Raylet "
            "connection closed.",
            "[2021-09-14 10:11:20,566 I 2122527 2122927] actor_manager.cc:139: received notification on actor, state: "
            "DEAD, actor_id: b725bb, ip address: 10.0.0.5, port: 35795, worker_id: a8a073, raylet_id: dc116a, "
            "num_restarts: 0, has creation_task_exception=1",
            "[2024-05-01 10:00:00,000 I 311 340] actor_manager.cc:236: received notification on actor, state: DEAD, "
            "ip address: 10.0.0.5, port: 10026, worker_id: a8a073, raylet_id: dc116a, num_restarts: 0, death context "
            "type=CreationTaskFailureContext actor_id=3c4636e63c7cc5c4dbf6315e01000000",
        ],
    ),
    pattern(
        NODE_DIED,
        [
            "node has died",
            "NodeDiedError",
            "has been marked dead",
            "marked as dead",
            "mistakenly been marked",
            "Failed to connect to GCS within",
        ],
        # The GCS's `detector` (Ray < 1.0: the `monitor`, naming a `client ID`) on a node it stopped hearing from, and
        # the raylet's own fatal line on learning it (Ray 1.x spells it `beem`).
        r"(?P<what>node has died|NodeDiedError|has been marked dead because the (?:detector|monitor) has missed too "
        r"many heartbeats|This node has bee[nm] marked as dead|node manager has mistakenly been marked (?:as )?dead"
        # A raylet or driver that lost the GCS for a minute exits with it (a fatal check, or `The program will
        # terminate.`): its node or the head went away.
        r"|Failed to connect to GCS within \d+ seconds)",
        [
            "The actor died because its node has died. Node Id: 8e2b",
            "The node with node id: 3f and address: 10.0.0.9 and node name: 10.0.0.9 has been marked dead "
            "because the detector has missed too many heartbeats from it.",
            "2019-08-03 09:58:24,196\tERROR worker.py:1713 -- The node with client ID 6a16415b has been marked dead "
            "because the monitor has missed too many heartbeats from it.",
            "[2022-02-16 12:46:52,789 C 149 149] node_manager.cc:170: This node has beem marked as dead.",
            "Exiting because this node manager has mistakenly been marked dead by the monitor.",
            "[2022-07-25 08:35:40,492 C 273 339] (raylet) gcs_rpc_client.h:537:  Check failed: absl::ToInt64Seconds("
            "absl::Now() - gcs_last_alive_time_) < ::RayConfig::instance().gcs_rpc_server_reconnect_timeout_s() "
            "Failed to connect to GCS within 60 seconds",
            "[2024-05-26 11:26:16,798 E 177479 178526] gcs_rpc_client.h:554: Failed to connect to GCS within 60 "
            "seconds. GCS may have been killed.",
        ],
    ),
    # Ray 2.x's driver on its raylet's unexpected end; the list of possible reasons after it (SIGKILL, the OOM killer,
    # SIGSEGV) names no cause, and a terminal often breaks it onto the next line.
    pattern(
        NODE_DIED,
        ["Raylet is terminated"],
        r"(?P<what>Raylet is terminated\b)(?::.*?\bip=(?P<ip>[\d.]+))?",
        [
            "2022-10-17 14:23:59,720 WARNING worker.py:1839 -- Raylet is terminated: ip=10.0.0.7, id=c28cee44b5cd67e7. "
            "Termination is unexpected. Possible reasons include: (1) SIGKILL by the user or system",
        ],
        wraps=True,
    ),
    pattern(
        JOB_FAILED,
        [" failed", "status=FAILED", "FAILED", "TrainingFailedError", "Job failed due to"],
        r"Job '?(?P<job>[\w-]+)'? failed\b|--- Job \S+ failed ---|Job (?:status|state)[:=]? ?FAILED"
        # `kubectl describe rayjob`: KubeRay's status block and its message for a job that raised
        r"|^\s*Job Status:\s+FAILED\b|Job failed due to an application error\b"
        r"|(?:Status for job|Job) '[\w-]+': FAILED\b|TrainingFailedError",
        [
            "Job 'raysubmit_V3pgxPzLr1d8vXJc' failed",
            "Status for job 'raysubmit_V3pgxPzLr1d8vXJc': FAILED",
            "--------------------------------------------- Job raysubmit_abc failed ---",
            "ray.train.base_trainer.TrainingFailedError: The Ray Train run failed.",
            "  Job Status:             FAILED",
            "  Message:                Job failed due to an application error, last available logs (truncated to "
            "20,000 chars):",
        ],
    ),
    pattern(
        JOB_STATUS_MESSAGE,
        ["Status message:"],
        r"^Status message: (?P<message>\S.*)",
        [
            "Status message: runtime_env setup failed: Failed to set up runtime environment.",
            "Status message: Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 "
            "chars):",
        ],
    ),
    pattern(
        RESOURCE_DEMAND,
        ["pending tasks", "pending actors", "pending placement groups"],
        _DEMAND + r"(?:\s*\*\s*\d+)?(?:\s*\(\w+\))?: (?P<count>\d+)\+? pending (?:tasks|actors|placement groups)",
        [
            " {'GPU': 1.0, 'CPU': 1.0}: 4+ pending tasks/actors",
            " {'CPU': 1.0, 'GPU': 8.0} * 1 (PACK): 1+ pending placement groups",
        ],
    ),
    pattern(
        INFEASIBLE_DEMAND,
        [
            "cannot be scheduled right now",
            "No available node types",
            "Add suitable node types",
            "Infeasible",
            "could not find a node type",
            "failed to schedule because there are not enough resources",
            "but the cluster only has",
        ],
        # Ray 2.x prints the request as a dict, some versions as defaultdict(<class 'float'>, {...}) or a list of them;
        # Ray 1.x's autoscaler ends its line at `request:` and lists the bundles on the next. The needles stop short of
        # the message's end, so a wrap later in it leaves them whole for the joined lines to match. The raylet and
        # GCS name the shapes first and the verdict after: Ray 1.x's `cannot be scheduled right now. It requires
        # {GPU: 1.000000}, {CPU: 1.000000} for placement` (0.8: `for execution and ... for placement`), 2.4x's
        # `Tasks or actors with resource shapes [{...}] failed to schedule because there are not enough resources for
        # the tasks or actors on the whole cluster`.
        r"(?:resource request cannot be scheduled right now: |No available node types can fulfill resource "
        r"requests? |Infeasible\w*:?.*?|could not find a node type to satisfy the request:\s*\[)"
        r"(?:defaultdict\(<class '\w+'>, )?" + _DEMAND + r"|cannot be scheduled right now\. It requires "
        r"(?P<placement>\{[^{}]*\}(?:, \{[^{}]*\})*) for (?:execution|placement)"
        # The autoscaler's request and advice, when a paste broke the line before the request.
        r"|(?P<advised>\{[^{}]*\})\)?\. Add suitable node types to this cluster"
        r"|resource shapes \[(?P<shapes>\{[^\]]*\})\] failed to schedule because there are not enough resources"
        # Ray Tune, when no trial has started for a minute: what a trial asks for against what the cluster has.
        r"|You asked for (?P<per_trial>[\d.]+ CPUs and [\d.]+ GPUs per trial), but the cluster only has",
        [
            "Warning: The following resource request cannot be scheduled right now: {'GPU': 8.0, 'CPU': 1.0}. "
            "This is likely due to all cluster resources being claimed by actors.",
            "Error: No available node types can fulfill resource request {'GPU': 4.0}. Add suitable node types "
            "to this cluster to resolve this issue.",
            "loading error2.jpg…](){'GPU': 1.0, 'CPU': 1.0}. Add suitable node types to this cluster to resolve this "
            "issue.",
            "(autoscaler +8m46s) Error: No available node types can fulfill resource request defaultdict(<class "
            "'float'>, {'CPU': 2.0, 'GPU': 2.0}). Add suitable node types to this cluster to resolve this issue.",
            "WARNING resource_demand_scheduler.py:838 -- The autoscaler could not find a node type to satisfy the "
            "request: [{'GPU': 1.0}]. Please specify a node type with the necessary resources.",
            "2021-03-08 13:22:17,520\tWARNING resource_demand_scheduler.py:643 -- The autoscaler could not find a node "
            "type to satisfy the request: [{'GPU': 8.0}]",
            "The actor or task with ID ffffffffffffffff45b95b1c0100 cannot be scheduled right now. It requires "
            "{GPU: 1.000000}, {CPU: 1.000000} for placement, however the cluster currently cannot provide the "
            "requested resources.",
            "The actor is not schedulable: Tasks or actors with resource shapes [{GPU: 8, CPU: 1}] failed to schedule "
            "because there are not enough resources for the tasks or actors on the whole cluster.",
            "WARNING insufficient_resources_manager.py:163 -- Ignore this message if the cluster is autoscaling. No "
            "trial is running and no new trial has been started within the last 60 seconds. This could be due to the "
            "cluster not having enough resources available. You asked for 8.0 CPUs and 4.0 GPUs per trial, but the "
            "cluster only has 4.0 CPUs and 0 GPUs available.",
        ],
        wraps=True,
    ),
    # Ray Tune <= 1.x raised this instead of queueing a trial no node could ever hold.
    pattern(
        INFEASIBLE_DEMAND,
        ["Insufficient cluster resources to launch trial"],
        r"Insufficient cluster resources to launch trial: trial requested (?P<per_trial>[\d.]+ CPUs, [\d.]+ GPUs)",
        [
            "ray.tune.error.TuneError: Insufficient cluster resources to launch trial: trial requested 11 CPUs, 1 "
            "GPUs but the cluster has only 4 CPUs, 1 GPUs, 1.37 GiB heap, 0.44 GiB objects.",
        ],
    ),
    # vLLM's Ray executor (and the frameworks that embed it) waiting for the GPUs of its placement group: the
    # wait is logged at 10, 30, 70, 150... seconds, so the first ones also pass in a healthy cluster whose workers
    # are still joining; a hundred seconds and more, or the check that the cluster has too few GPUs, is a cluster
    # that cannot hold it.
    pattern(
        INFEASIBLE_DEMAND,
        ["required GPUs exceeds the total number of available GPUs", "Waiting for creating a placement group"],
        r"The number of required GPUs exceeds the total number of available GPUs in the placement group"
        r"|Waiting for creating a placement group of specs for [1-9]\d{2,} seconds\. specs=\[(?P<demand>.*?)\]\.",
        [
            "WARNING 04-01 02:45:50 ray_utils.py:320] The number of required GPUs exceeds the total number of "
            "available GPUs in the placement group.",
            "Waiting for creating a placement group of specs for 150 seconds. specs=[{'GPU': 1.0, 'node:x': 0.001}, "
            "{'GPU': 1.0}]. Check `ray status` to see if you have enough resources.",
        ],
    ),
    pattern(
        DASHBOARD_UNREACHABLE,
        [
            "Failed to connect to Ray at address",
            "Failed to connect to the dashboard",
            "Failed to connect to dashboard",
            "Failed to start the dashboard",
            "Failed to forward dashboard",
            "The agent on node",
            "dashboard",
            ":8265",
            "port=8265",
            "Request failed with status code",
            "failed to submit job",
            "Failed to get job info",
            "SubmitJob fail",
            "Ray agent failed",
        ],
        r"(?P<what>Failed to connect to Ray at address: \S+|Failed to connect to (?:the )?(?:Ray )?dashboard\S*"
        r"|Failed to start the dashboard|Failed to forward dashboard from remote port \d+"
        # the dashboard, or its per-node agent (Ray 1.x's new_dashboard/agent.py), dying at start
        r"|The (?:dashboard|agent) on node \S+ failed with the following error|^\s*dashboard \[exit code=-?\d+\]"
        # Ray 2.x's raylet, which fate-shares with the dashboard agent and exits when it fails (before 2.5 the
        # dashboard agent was its only agent, and the message named none)
        r"|The raylet exited immediately because (?:the Ray agent failed|one Ray agent failed, agent_name = "
        r"dashboard_agent\b)"
        r"|[Dd]ashboard (?:is )?(?:not (?:available|reachable)|unreachable)"
        r"|Could not (?:connect|reach) (?:to )?the (?:Ray )?dashboard|Request failed with status code 5\d\d"
        r"|port=8265\): Max retries exceeded|:8265\S*: (?:connect: )?connection refused"
        r"|dial tcp [^ ]+:8265: \S+(?: \S+)*?: (?:connection refused|i/o timeout|no such host)"
        # KubeRay's operator calling the job API (the dashboard agent's port 52365 before KubeRay 1.0)
        r"|(?:failed to submit job|Failed to get job info|SubmitJob fail).*?(?:[Cc]onnection refused|Connect call "
        r"failed|i/o timeout|no such host|Remote end closed connection))",
        [
            "ConnectionError: Failed to connect to Ray at address: http://127.0.0.1:8265.",
            "requests.exceptions.ConnectionError: HTTPConnectionPool(host='raycluster-head-svc', port=8265): "
            "Max retries exceeded with url: /api/jobs/ (Caused by NewConnectionError('Failed to establish a new "
            "connection: [Errno 111] Connection refused'))",
            'ERROR rayjob_controller.go:292 Failed to get job info {"error": "Get \\"http://rayjob-head-svc.'
            'ns.svc.cluster.local:8265/api/jobs/x\\": dial tcp 10.96.0.12:8265: connect: connection refused"}',
            # `ray dashboard cluster.yaml` (Ray 1.x)
            "Error: Failed to forward dashboard from remote port 8265 to local port 8265. There are a couple "
            "possibilities: ",
            # `ray start --block` after "Some Ray subprocesses exited unexpectedly:"
            "  dashboard [exit code=-11]",
            '2023-04-17T06:55:25.958Z\tERROR\tcontrollers.RayJob\tfailed to submit job\t{"error": "SubmitJob fail: '
            "Traceback (most recent call last):\\n ... ConnectionRefusedError: [Errno 111] Connect call failed "
            "('10.244.3.9', 52365)\\n\\n\"}",
            "2025-06-27 10:16:18,850\tERROR dashboard.py:304 -- The dashboard on node gpu-node-1 failed with the "
            "following error:",
            "2020-11-11 14:13:37,114\tWARNING worker.py:1111 -- The agent on node gpu-node-1 failed with the "
            "following error:",
            "(raylet) agent_manager.cc:83: The raylet exited immediately because one Ray agent failed, agent_name = "
            "dashboard_agent/424238335.",
            "[2023-06-09 01:52:53,319 E 9906 9971] (raylet) agent_manager.cc:135: The raylet exited immediately "
            "because the Ray agent failed. The raylet fate shares with the agent.",
        ],
    ),
    pattern(
        JOB_SUBMIT_ADDRESS,
        ["Using address http", "--address http", "--address=http", "RAY_ADDRESS=", "ray job submit"],
        # Without an address the command still says that a submission was under way: a shell echoes it (`set -x`'s
        # `+ `, a prompt's `$ `) at the start of the line, before what it prints.
        r"Using address (?P<address>https?://\S+)|\bray job submit\b.*?--address[= ](?P<submit_address>https?://\S+)"
        r"|RAY_ADDRESS=[\"']?(?P<env_address>https?://[^\s\"']+)[\"']? ray job submit\b"
        r"|^(?:[+$#>] |(?:\(\S+\) )?[\w.-]+@[\w.-]+:\S*[#$] ?)?(?P<command>ray job submit)\b",
        [
            "Using address http://raycluster-head-svc:8265 (no port-forwarding)",
            "Ray command: [ray job submit --address http://127.0.0.1:8265 --working-dir ./ -- python train.py]",
            'RAY_ADDRESS="http://10.0.0.4:8265" ray job submit --working-dir ./ -- python script.py',
            "+ ray job submit --runtime-env=verl/trainer/runtime_env.yaml --no-wait -- python3 -m verl.trainer.main",
            "root@head-node:~/1# ray job submit --working-dir /root/1 -- python 1.py",
        ],
    ),
    pattern(
        SUBMISSION_CLIENT_FRAME,
        ["modules/job/sdk.py", "modules/job/cli", "modules/dashboard_sdk.py"],
        # The client's files only: the dashboard's own (job_head.py, job_manager.py) run on the head, and their frames
        # come back inside a 500 response's message.
        r'^\s*File "[^"]*ray/dashboard/modules/(?:job/(?:sdk|cli|cli_utils)|dashboard_sdk)\.py", line \d+, in '
        r"(?P<function>\w+)",
        [
            '  File "/usr/lib/python3.10/dist-packages/ray/dashboard/modules/job/sdk.py", line 254, in submit_job',
            '  File "/opt/conda/lib/python3.9/site-packages/ray/dashboard/modules/dashboard_sdk.py", line 248, in '
            "_check_connection_and_version",
        ],
    ),
    pattern(
        HTTP_CONNECT_FRAME,
        ["urllib3/connection.py", "urllib3/util/connection.py", "urllib3/connectionpool.py"],
        # The request itself (`urlopen`) too: a dashboard address that answers in another protocol (the GCS port)
        # fails there, in `getresponse`. A paste through a forum may have turned the quotes curly.
        r'^\s*File ["“][^"”]*urllib3/(?:(?:util/)?connection\.py["”], line \d+, in (?P<function>_new_conn'
        r'|create_connection)\b|connectionpool\.py["”], line \d+, in (?P<request>urlopen)\b)',
        [
            '  File "/opt/conda/lib/python3.10/site-packages/urllib3/connection.py", line 198, in _new_conn',
            '  File "/usr/lib/python3/dist-packages/urllib3/util/connection.py", line 85, in create_connection',
            "File “/usr/local/lib/python3.9/site-packages/urllib3/connectionpool.py”, line 703, in urlopen",
        ],
    ),
    pattern(
        JOB_SUBMITTED,
        ["submitted successfully", "Job submission server address"],
        r"Job '?\S+?'? submitted successfully|Job submission server address: \S+",
        [
            "Job 'raysubmit_tu2TRtXLLnkVxLe1' submitted successfully",
            "2024-01-01 10:00:00,000\tINFO cli.py:36 -- Job submission server address: http://127.0.0.1:8265",
        ],
    ),
)
