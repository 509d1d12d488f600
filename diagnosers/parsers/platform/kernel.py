"""Kernel messages (dmesg, journalctl -k) and what reports them: NVIDIA XID events and the OOM killer.

The OOM killer is also reported second-hand: SLURM's step daemon and systemd count cgroup
oom-kill events, Ray before 2.0 raised RayOutOfMemoryError. A process killed with SIGKILL (a
shell's `Killed`, exit code 137 or -9) is usually the OOM killer's victim too, but timeouts and
preemptions send the same signal: failures.KILLED_BY_SIGNAL reads those lines, and the memory rule takes them
only as a guess.
SLURM's `Exceeded step memory limit at some point.` is no kill either: the cgroup's usage touched its limit once
(page cache counts), and steps that completed print it too.
"""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

XID = "kernel.xid"
GPU_FAULT = "gpu.fault"
OOM_KILL = "kernel.oom-kill"
OOM_REPORTED = "host.oom-reported"
MEMORY_LIMIT_TOUCHED = "host.memory-limit-touched"
ALLOCATION_FAILED = "host.allocation-failed"
PROCESS_CRASH = "process.crash"

PATTERNS = (
    pattern(
        XID,
        ["NVRM: Xid", "Xid (PCI:", "XidCriticalError"],
        # The kernel's line, or the NVIDIA device plugin's health check that read it from NVML.
        r"(?:Xid \((?P<pci>PCI:[^)]*)\): |XidCriticalError: Xid=)(?P<xid>\d+)\b,?\s*(?P<message>.*)",
        [
            "[Tue Nov 12 03:14:15 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
            "kernel: NVRM: Xid (PCI:0000:86:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit "
            "error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
            "2020/08/10 19:09:42 XidCriticalError: Xid=48 on Device=GPU-7540a9b3, the device will go unhealthy.",
        ],
    ),
    pattern(
        GPU_FAULT,
        [
            "fallen off the bus",
            "uncorrectable ECC error",
            "GPU is lost",
            "ECC error",
            "uncorrectable NVLink error",
            "Unable to determine the device handle for GPU",
            "RmInitAdapter failed",
        ],
        # Driver 570 splits "The NVIDIA GPU ... / NVRM: fallen off the bus" over lines, without "has".
        r"(?P<what>(?:has |NVRM: )fallen off the bus|uncorrectable ECC error encountered|GPU is lost"
        r"|cudaErrorECCUncorrectable|CUDA_ERROR_ECC_UNCORRECTABLE|uncorrectable NVLink error detected"
        # nvidia-smi on a GPU the driver lost (it names the reason, `GPU is lost` or `Unknown Error`); some builds
        # print no space before the bus id.
        r"|Unable to determine the device handle for GPU ?[\w:.]+: .*"
        # The driver could not bring the GPU up at all (often after an Xid 79).
        r"|RmInitAdapter failed!.*)",
        [
            "NVRM: GPU at PCI:0000:3b:00: GPU-2d7e has fallen off the bus.",
            "               NVRM: fallen off the bus and is not responding to commands.",
            "RuntimeError: CUDA error: uncorrectable ECC error encountered",
            "Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  Reboot the system to "
            "recover this GPU",
            "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error",
            "Unable to determine the device handle for GPU0000:07:00.0: Unknown Error",
            "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution",
            "[   12.345678] NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x26:0xffff:1290)",
        ],
    ),
    pattern(
        OOM_KILL,
        [
            "Out of memory: Kill",
            "out of memory: Kill",
            "oom-kill:",
            "invoked oom-killer",
            "Memory cgroup out of memory",
        ],
        r"(?:Memory cgroup )?[Oo]ut of memory: Kill(?:ed)? process (?P<pid>\d+) \((?P<process>[^)]*)\)"
        r"|oom-kill:.*task=(?P<task>[^,]+)|(?P<invoker>\S+) invoked oom-killer",
        [
            "[ 8811.012] Out of memory: Killed process 4242 (python) total-vm:80123456kB, anon-rss:62000000kB",
            "Memory cgroup out of memory: Killed process 311 (ray::RayTrainWo) total-vm:1kB",
            "[ 8811.010] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=abc,mems_allowed=0,"
            "oom_memcg=/kubepods/pod1,task_memcg=/kubepods/pod1/c,task=python,pid=4242,uid=1000",
        ],
    ),
    pattern(
        OOM_REPORTED,
        [
            "oom-kill event",
            "oom_kill event",
            "Exceeded job memory limit",
            "Exceeded step memory limit",
            "exceeded memory limit",
            "exceeded virtual memory limit",
            "Out Of Memory",
            "OUT_OF_MEMORY",
            "killed by the OOM killer",
            "result 'oom-kill'",
            "RayOutOfMemoryError",
            "ran out-of-memory and exited",
            "ran out of memory and exited",
            "cgroup out-of-memory handler",
        ],
        r"(?P<what>Detected \d+ oom[-_]kill events?(?:\(s\))? in \S+.*"
        r"|Exceeded (?:job|step) memory limit(?! at some point)\b.*"
        r"|(?:Job|Step) [\d.]+ exceeded (?:virtual )?memory limit \(\d+ > \d+\), being killed.*"
        r"|tasks? [\d,-]+: Out Of Memory|\bDUE TO OUT_OF_MEMORY\b.*|State:\s*OUT_OF_MEMORY\b.*"
        # systemd's report, not Ray's list of what may have killed a worker ("(1) the process was killed by the OOM
        # killer due to high memory usage, (2) ...").
        r"|has been killed by the OOM killer.*|Failed with result 'oom-kill'.*"
        r"|RayOutOfMemoryError: More than [\d.]+% of the memory on node\b.*"
        # Ray Tune < 1.0 shows the trial's failure as the task error wrapping it.
        r"|RayTaskError\(RayOutOfMemoryError\).*"
        # Google Cloud ML Engine's and Vertex AI's job status for a replica whose container ran out of RAM.
        r"|\b[Tt]he replica [\w-]+(?: \d+)? ran out[- ]of[- ]memory and exited\b.*"
        # slurmstepd's second sentence, quoted without the first.
        r"|\bkilled by the cgroup out-of-memory handler\b.*)",
        [
            "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup. Some of your processes may "
            "have been killed by the cgroup out-of-memory handler.",
            "slurmstepd: error: Detected 2 oom-kill event(s) in step 4412.0 cgroup.",
            "slurmstepd: error: Detected 1 oom_kill event in StepId=440575.0. Some of the step tasks have been OOM "
            "Killed.",
            "slurmstepd: error: Exceeded job memory limit",
            "slurmstepd: error: Job 7518 exceeded memory limit (626359956 > 512000000), being killed",
            "slurmstepd: error: Step 4412.0 exceeded virtual memory limit (9437184 > 8388608), being killed",
            "srun: error: gpu-node-07: task 0: Out Of Memory",
            "State: OUT_OF_MEMORY (exit code 0)",
            "systemd[1]: train.service: A process of this unit has been killed by the OOM killer.",
            "systemd[1]: train.service: Failed with result 'oom-kill'.",
            "ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node ip-10-0-0-5 is used "
            "(29.9 / 31.4 GB).",
            "ray.exceptions.RayTaskError(RayOutOfMemoryError): ray::PPO (pid=448, ip=172.20.1.205)",
            "The replica master 0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL)",
            "The replica workerpool0-0 ran out of memory and exited with a non-zero status of 9(SIGKILL).",
        ],
    ),
    pattern(
        MEMORY_LIMIT_TOUCHED,
        ["memory limit at some point"],
        r"(?P<what>Exceeded (?:job|step) memory limit at some point\b.*)",
        [
            "slurmstepd: error: Exceeded step memory limit at some point.",
            "slurmstepd: Exceeded job memory limit at some point.",
        ],
    ),
    # A process that asked for host memory and was refused: PyTorch's CPU allocator, numpy, C++'s bad_alloc, errno 12
    # from a syscall or a shell's fork. Not InfiniBand's `ibv_reg_mr ... Cannot allocate memory` (the memlock
    # limit, NCCL's business) nor torch's shared-memory mmap (a DataLoader's /dev/shm).
    pattern(
        ALLOCATION_FAILED,
        [
            "DefaultCPUAllocator: ",
            "Unable to allocate",
            "std::bad_alloc",
            "[Errno 12] Cannot allocate memory",
            "fork: Cannot allocate memory",
            "posix_memalign(",
        ],
        r"(?P<what>DefaultCPUAllocator: (?:can't allocate memory|not enough memory)\b.*"
        r"|MemoryError: Unable to allocate [\d.]+ [KMGTP]?i?B for an array\b.*"
        # (RAPIDS' device allocator throws bad_alloc too, naming the GPU: cuda.OUT_OF_MEMORY's.)
        r"|(?:instance of '|what\(\):\s+)std::bad_alloc\b(?!: out_of_memory: (?:CUDA error|RMM failure)).*"
        r"|\[Errno 12\] Cannot allocate memory.*|\bfork: Cannot allocate memory.*"
        # Caffe2's CPU allocator enforcing posix_memalign's result: 12 is ENOMEM.
        r"|\bposix_memalign\(.*\) == 0\. 12 vs 0\b.*)",
        [
            "RuntimeError: [enforce fail at alloc_cpu.cpp:83] err == 0. DefaultCPUAllocator: can't allocate memory: "
            "you tried to allocate 4294967296 bytes. Error code 12 (Cannot allocate memory)",
            "RuntimeError: [enforce fail at CPUAllocator.cpp:64] . DefaultCPUAllocator: can't allocate memory: you "
            "tried to allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)",
            "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.58 GiB for an array with shape "
            "(480000, 1000) and data type float64",
            "terminate called after throwing an instance of 'std::bad_alloc'",
            "  what():  std::bad_alloc",
            "OSError: [Errno 12] Cannot allocate memory",
            "/usr/bin/bash: fork: Cannot allocate memory",
            "RuntimeError: [enforce fail at allocator.h:48] posix_memalign(&data, gCaffe2Alignment, nbytes) == 0. 12 "
            "vs 0 Error from operator: ",
        ],
    ),
    pattern(
        PROCESS_CRASH,
        ["segfault at", "Segmentation fault", "SIGSEGV", "Fatal Python error", "exit code 139", "SIGABRT"],
        r"(?P<what>segfault at \w+|Fatal Python error: \w[\w ]*|\bSegmentation fault\b|\bSIG(?:SEGV|ABRT)\b"
        r"|exit code 139)",
        [
            "[ 9001.1] python[4242]: segfault at 0 ip 00007f3c sp 00007ffd error 4 in libc.so.6",
            "Fatal Python error: Segmentation fault",
            "*** SIGSEGV received at time=1700000000 on cpu 3 ***",
        ],
    ),
)
