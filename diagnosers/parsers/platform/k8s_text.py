"""Kubernetes pod and event states as people paste them, and as the JSON parsers restate them.

`kubectl describe pod` prints `Reason:  OOMKilled` under Last State and an Events table;
`kubectl get events` prints `LAST SEEN TYPE REASON OBJECT MESSAGE` rows; `kubectl get pods`
prints a STATUS column. The same patterns read the `reason`/`message` strings of events.json
and pods.json, so both forms give the same signals.
"""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

UNSCHEDULABLE = "k8s.unschedulable"
IMAGE_PULL = "k8s.image-pull"
OOM_KILLED = "k8s.oom-killed"
EVICTED = "k8s.evicted"
CRASH_LOOP = "k8s.crash-loop"
TERMINATED_REASON = "k8s.terminated-reason"
# A Kubeflow training job's Failed condition: the operator counts the replicas whose pods failed, naming no cause.
REPLICA_FAILED = "k8s.replica-failed"

PATTERNS = (
    pattern(
        UNSCHEDULABLE,
        [
            "FailedScheduling",
            "nodes are available",
            "didn't trigger scale-up",
            "NotTriggerScaleUp",
            "exceeded quota",
            "insufficient unused quota",
            "insufficient quota",
            "nodes are unavailable",
            "tasks in gang unschedulable",
            "NotEnoughResources",
            "Workload didn't fit",
            "queue resource quota insufficient",
            "resource in cluster is overused",
            "No nodes with enough resources",
            "couldn't assign flavors to pod set",
            "requested number of devices unavailable",
            "required for gang scheduling",
            "no nodes with enough resources",
            "Node didn't have enough resource:",
            "OutOf",
            "requested number of GPUs unavailable",
        ],
        r"(?P<what>\d+/\d+ nodes are available:.*|FailedScheduling\b.*|pod didn't trigger scale-up.*"
        r"|NotTriggerScaleUp\b.*|exceeded quota:.*|insufficient (?:unused )?quota for [\w./-]+.*"
        # Volcano: its predicates, and a gang whose pods are unschedulable; "1/0 tasks" (no pod created yet) is left
        # out, the controller reports it while a job starts
        r"|\d+/\d+ nodes are unavailable:.*|\d+/\d+ tasks in gang unschedulable:.*?\b\d+ Unschedulable\b.*"
        # Volcano's enqueue stage turning a job away (the proportion/capacity plugins, the older overcommit one)
        r"|\bqueue resource quota insufficient\b.*|\bresource in cluster is overused\b.*"
        # NVIDIA KAI-Scheduler
        r"|No nodes with enough resources were found:.*"
        r"|\bNotEnoughResources\b.*"
        # Kueue not admitting a workload, whatever the flavor's reason (no quota, a resource the ClusterQueue lacks)
        r"|couldn't assign flavors to pod set [\w.-]+:.*"
        # Kueue before 0.2 named no resource
        r"|Workload didn't fit\b.*"
        # The kubelet refusing a pod the scheduler placed on a node whose GPUs are taken or went unhealthy.
        r"|Allocate failed due to requested number of devices unavailable for \S+.*"
        # Kubernetes 1.6's own GPU manager said it of the alpha GPU resource, in the pod's status.
        r"|\brequested number of GPUs unavailable\. Requested: \d+, Available: \d+"
        # KAI-Scheduler's PodGroup condition for a gang only part of which fits, and its lower-case reason after it
        r"|Resources were found for \d+ pods? while \d+ (?:is|are) required for gang scheduling\b.*"
        r"|no nodes with enough resources were found:.*"
        # The kubelet rejecting at admission a pod placed on a node short of it (reason OutOfmemory, OutOfcpu, ...)
        r"|Node didn't have enough resource: [\w./-]+.*"
        # ... and its reason for that, `OutOf<resource>` (Kubernetes 1.6-1.8's `OutOfalpha.kubernetes.io/nvidia-gpu`),
        # as `kubectl describe pod` shows it when the message is cut off.
        r"|\bReason:\s+OutOf(?:cpu|memory|pods|ephemeral-storage|[a-z][\w.-]*/[\w.-]+)\s*$)",
        [
            "  Warning  FailedScheduling  2m (x12 over 13m)  default-scheduler  0/4 nodes are available: 4 "
            "Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 4 No preemption victims found.",
            'Error creating: pods "w-1" is forbidden: exceeded quota: gpu-quota, requested: '
            "requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8",
            "couldn't assign flavors to pod set workers: insufficient unused quota for nvidia.com/gpu in flavor "
            "gpu-a100, 8 more needed",
            "0/3 nodes are unavailable: 3 Insufficient nvidia.com/gpu.",
            "Message:        Pod Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
            "Requested: 1, Available: 0, which is unexpected",
            "  Warning  PodGroupPending  7m43s  vc-controller-manager  PodGroup default:job-sample unschedule,reason: "
            "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; Pending: 1 "
            "Unschedulable",
            "    reason: NotEnoughResources",
            "  Normal   Unschedulable  15s (x13 over 28s)  volcano  queue resource quota insufficient",
            "  Normal   Unschedulable  17s (x13 over 29s)  volcano  resource in cluster is overused",
            "Warning  Unschedulable  kai-scheduler  No nodes with enough resources were found: 2 node(s) didn't have "
            "enough resources: GPUs.",
            "Warning  Pending  workload/job-train-3c1f2  Workload didn't fit in the remaining quota",
            "  Warning  Pending  4m23s  kueue-admission  couldn't assign flavors to pod set job: resource cpu "
            "unavailable in ClusterQueue",
            "condition message: PodSchedulingErrors: Resources were found for 2 pods while 4 are required for gang "
            "scheduling. Additional pods cannot be scheduled due to: no nodes with enough resources were found: 2 "
            "node(s) didn't have enough resources: GPUs.",
            "Message:          Pod was rejected: Node didn't have enough resource: memory, requested: 2147483648, "
            "used: 32290433792, capacity: 32457011200",
            "Reason:         OutOfalpha.kubernetes.io/nvidia-gpu",
            "gpu       0/1       requested number of GPUs unavailable. Requested: 4, Available: 0   0          36s",
        ],
    ),
    pattern(
        IMAGE_PULL,
        [
            "ErrImagePull",
            "ImagePullBackOff",
            "Back-off pulling image",
            "Failed to pull image",
            "InvalidImageName",
            "ErrImageNeverPull",
            "trying and failing to pull image",
            "image can't be pulled",
            # Not "failed to ...": the portable scanner finds no needle that overlaps another's " failed".
            "pull and unpack image",
            "Error response from daemon",
            "to register layer",
            "Error pulling image",
            "error pulling image configuration",
            "toomanyrequests",
            "InspectFailed",
            "couldn't parse image reference",
            "no pull access",
        ],
        r"(?P<what>Failed to pull image \"?(?P<image>[^\"\s:]+(?::[^\"\s]+)?)\"?.*"
        r"|Back-off pulling image \"?(?P<backoff_image>[^\"\s]+)\"?.*"
        r"|\b(?:ErrImagePull|ImagePullBackOff|InvalidImageName|ErrImageNeverPull)\b.*"
        # `kubectl logs` of a container that never started
        r"|is waiting to start: (?:trying and failing to pull image|image can't be pulled).*"
        # containerd / crictl / ctr, and the Docker daemon's pull errors in every version
        r"|failed to pull and unpack image \"?(?P<unpack_image>[^\"\s]+)\"?.*"
        r"|Error response from daemon: (?:manifest for \S+ not found|pull access denied|toomanyrequests|unauthorized"
        r"|Head \"?https?://\S+/manifests/).*"
        r"|failed to register layer: .*no space left on device.*|Error pulling image .*"
        # the docker CLI when the image's config blob cannot be fetched (registry auth, network)
        r"|error pulling image configuration: .*"
        r"|toomanyrequests: You have reached your pull rate limit.*"
        # the kubelet on a name no registry could serve (upper case, a stray space)
        r"|\bInspectFailed\b.*|couldn't parse image reference .*"
        # Docker 1.13-17.x daemons' words for a denied or missing repository
        r"|repository \S+ not found: does not exist or no pull access.*)",
        [
            '  Warning  Failed     3m   kubelet  Failed to pull image "rayproject/ray:2.99-gpu": rpc error: code = '
            "NotFound desc = failed to pull and unpack image",
            "raycluster-gpu-head-9x7kq   0/1     ImagePullBackOff   0          5m",
            'Error from server (BadRequest): container "ray-head" in pod "raycluster-head-x" is waiting to start: '
            "trying and failing to pull image",
            'FATA[0002] pulling image: rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/'
            'rayproject/ray:9.9": failed to resolve reference "docker.io/rayproject/ray:9.9": not found',
            "Error response from daemon: manifest for rayproject/ray:9.9-gpu not found: manifest unknown: manifest "
            "unknown",
            "failed to register layer: Error processing tar file(exit status 1): write /usr/lib/libcudnn.so.8: no "
            "space left on device",
            "toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating "
            "and upgrading: https://www.docker.com/increase-rate-limit",
            "Mar 13 15:19:00 k8s-master-0 docker[6947]: /usr/bin/docker: error pulling image configuration: "
            "unauthorized: Requested repository does not match bearer token resource: hyperkube-amd64.",
            '  Warning  InspectFailed  1m  kubelet  Failed to apply default image tag "MyImage:Latest": couldn\'t '
            'parse image reference "MyImage:Latest": invalid reference format: repository name must be lowercase',
            'level=error msg="Handler for POST /v1.26/images/create returned error: repository kube-aggregator not '
            'found: does not exist or no pull access"',
        ],
    ),
    pattern(
        OOM_KILLED,
        ["OOMKilled", "OOMKilling", "low on resource: memory"],
        r"(?P<what>\bOOMKill(?:ed|ing)\b.*|The node was low on resource: memory.*)",
        [
            "      Reason:       OOMKilled",
            "5m   Warning   OOMKilling   node/gpu-node-3   Memory cgroup out of memory: Killed process 311",
        ],
    ),
    pattern(
        EVICTED,
        ["Evicted"],
        # Volcano's job controller handling a pod the scheduler evicted (preempt, reclaim): `Event:PodEvicted`; a job
        # spec's `event: PodEvicted` policy is configuration, not an eviction
        r"(?P<what>\bEvicted\b.*|\bEvent:PodEvicted\b.*)",
        [
            "Reason:       Evicted",
            "ray-worker-abc   0/1     Evicted   0          1h",
            "I0128 08:13:50.578876       1 job_controller.go:305] Try to handle request <Queue: , Job: default/hvd, "
            "Task:worker, Event:PodEvicted, ExitCode:0, Action:, JobVersion: 0>",
        ],
    ),
    pattern(
        CRASH_LOOP,
        ["CrashLoopBackOff", "Back-off restarting failed container"],
        r"(?P<what>\bCrashLoopBackOff\b.*|Back-off restarting failed container.*)",
        [
            "      Reason:       CrashLoopBackOff",
            "Warning  BackOff  1m (x20 over 6m)  kubelet  Back-off restarting failed container ray-worker in pod w-0",
        ],
    ),
    # The reason `kubectl describe` gives a terminated container in the runtime's own word (`Error`, `Completed`),
    # OOMKilled aside: the `Exit Code:` printed under it is read in that light.
    pattern(
        TERMINATED_REASON,
        ["Reason:"],
        r"^\s*Reason:\s+(?!OOMKill)(?P<reason>[A-Z]\w*)\s*$",
        ["      Reason:       Error", "      Reason: Completed"],
    ),
    pattern(
        REPLICA_FAILED,
        ["replica(s) failed"],
        r"(?P<what>\b\w*Job [\w./-]+ (?:has|is) failed because \d+ \w+ replica\(s\) failed.*)",
        [
            "  Message:               TFJob myjob has failed because 1 Worker replica(s) failed.",
            "PyTorchJob default/pytorch-dist is failed because 2 Worker replica(s) failed.",
        ],
    ),
    # SLURM's container plugin (NVIDIA pyxis) when enroot cannot import `--container-image`, and the enroot log
    # line it prints below, naming the registry's refusal (401 for a private image asked for anonymously).
    pattern(
        IMAGE_PULL,
        ["failed to import docker image", "returned error code: "],
        r"(?P<what>\bpyxis: failed to import docker image\b.*"
        r"|\[ERROR\] URL https?://\S+ returned error code: [45]\d\d\b.*)",
        [
            "slurmstepd: error: pyxis: failed to import docker image",
            "slurmstepd: error: pyxis:     [ERROR] URL https://registry-1.docker.io/v2/library/nemo/manifests/24.01 "
            "returned error code: 401 Unauthorized",
        ],
    ),
)
