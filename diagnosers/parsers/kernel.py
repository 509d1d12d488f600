"""Kernel messages (dmesg, journalctl -k): NVIDIA XID events and the OOM killer."""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

XID = "kernel.xid"
GPU_FAULT = "gpu.fault"
OOM_KILL = "kernel.oom-kill"
PROCESS_CRASH = "process.crash"

PATTERNS = (
    pattern(
        XID,
        ["NVRM: Xid", "Xid (PCI:"],
        r"Xid \((?P<pci>PCI:[^)]*)\): (?P<xid>\d+)\b,?\s*(?P<message>.*)",
        [
            "[Tue Nov 12 03:14:15 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
            "kernel: NVRM: Xid (PCI:0000:86:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit "
            "error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
        ],
    ),
    pattern(
        GPU_FAULT,
        ["fallen off the bus", "uncorrectable ECC error", "GPU is lost", "ECC error"],
        r"(?P<what>has fallen off the bus|uncorrectable ECC error encountered|GPU is lost"
        r"|cudaErrorECCUncorrectable|CUDA_ERROR_ECC_UNCORRECTABLE)",
        [
            "NVRM: GPU at PCI:0000:3b:00: GPU-2d7e has fallen off the bus.",
            "RuntimeError: CUDA error: uncorrectable ECC error encountered",
            "Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  Reboot the system to "
            "recover this GPU",
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
