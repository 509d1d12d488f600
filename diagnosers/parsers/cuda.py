"""CUDA and driver messages from PyTorch, JAX/XLA, NCCL and nvidia-smi.

Patterns quote the error as the runtime prints it ("CUDA out of memory. Tried to allocate",
"CUDA error: out of memory"), never the bare words, so a log that merely talks about
avoiding out-of-memory errors does not read as one.
"""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

OUT_OF_MEMORY = "cuda.out-of-memory"
NO_DEVICE = "cuda.no-device"
PYTORCH_DATALOADER = "torch.dataloader-died"

PATTERNS = (
    pattern(
        OUT_OF_MEMORY,
        [
            "CUDA out of memory",
            "CUDA error: out of memory",
            "CUDA_ERROR_OUT_OF_MEMORY",
            "cudaErrorMemoryAllocation",
            "CUBLAS_STATUS_ALLOC_FAILED",
            "RESOURCE_EXHAUSTED: Out of memory",
            "Cuda failure 'out of memory'",
            "Cuda failure 2 'out of memory'",
        ],
        r"CUDA out of memory\. Tried to allocate (?P<tried>[\d.]+ [KMGT]i?B)"
        r"(?:.*?GPU (?P<gpu>\d+)(?:;| has a total capacity of) (?P<total>[\d.]+ [KMGT]i?B))?"
        r"(?:.*?(?:of which|;) (?P<free>[\d.]+ [KMGT]i?B) (?:is )?free)?"
        r"(?:.*?(?P<reserved_unallocated>[\d.]+ [KMGT]i?B) is reserved by PyTorch but unallocated)?"
        r"|(?:Error|Exception)\)?: CUDA (?:error: )?out of memory(?!\. Tried)"
        r"|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED"
        r"|RESOURCE_EXHAUSTED: Out of memory|Cuda failure (?:2 )?'out of memory'",
        [
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
            "of 79.15 GiB of which 1.23 GiB is free. Process 1234 has 77.9 GiB memory in use. Of the allocated "
            "memory 70.1 GiB is allocated by PyTorch, and 6.2 GiB is reserved by PyTorch but unallocated.",
            "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; "
            "14.1 GiB already allocated; 3.19 MiB free; 14.4 GiB reserved in total by PyTorch)",
            "RuntimeError: CUDA error: out of memory",
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
            "4294967296 bytes.",
        ],
    ),
    pattern(
        NO_DEVICE,
        [
            "No CUDA GPUs are available",
            "no CUDA-capable device is detected",
            "Found no NVIDIA driver",
            "CUDA driver version is insufficient",
            "couldn't communicate with the NVIDIA driver",
            "NVIDIA driver on your system is too old",
            "Driver/library version mismatch",
            "cudaErrorNoDevice",
            "CUDA_ERROR_NO_DEVICE",
            "is_available() is False",
            "No devices were found",
            "nvidia-container-cli",
            "CUDA available: False",
            "cuda.is_available(): False",
            "CUDA is not available",
            "GPU is lost",
            "could not load NVML library",
            "NVIDIA Container Toolkit",
            "CUDA unknown error",
            "available devices to be zero",
        ],
        r"(?P<error>No CUDA GPUs are available|no CUDA-capable device is detected|Found no NVIDIA driver"
        r"|CUDA driver version is insufficient for CUDA runtime version"
        r"|NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
        r"|The NVIDIA driver on your system is too old|Driver/library version mismatch"
        r"|cudaErrorNoDevice|CUDA_ERROR_NO_DEVICE|torch\.cuda\.is_available\(\) is False"
        r"|^\s*No devices were found\s*$|nvidia-container-cli: (?:initialization|requirement) error.*"
        r"|CUDA available: False|cuda\.is_available\(\): False|CUDA is not available"
        r"|could not load NVML library|did you configure the NVIDIA Container Toolkit"
        r"|CUDA initialization: CUDA unknown error|Setting the available devices to be zero)",
        [
            "RuntimeError: No CUDA GPUs are available",
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
            "latest NVIDIA driver is installed and running.",
            "RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False.",
            "No devices were found",
            "Failed to initialize NVML: Driver/library version mismatch",
            "E1122 12:00:00.000 main.go:123] could not load NVML library: libnvidia-ml.so.1: cannot open shared "
            "object file: No such file or directory",
            "UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up "
            "environment. Setting the available devices to be zero.",
        ],
    ),
    pattern(
        PYTORCH_DATALOADER,
        [
            "DataLoader worker",
            "bus error encountered in worker",
            "segmentation fault encountered in worker",
            "DataLoader timed out",
            "unable to open shared memory",
            "unable to write to file </torch_",
            "Communication with the workers is no longer possible",
        ],
        r"DataLoader worker \(pid(?:\(s\))? (?P<pid>[\d, ]+)\) (?:is killed by signal: (?P<signal>[\w ]+?)\.?"
        r"(?:\s|$)|exited unexpectedly)"
        r"|Unexpected (?P<fault>bus error|segmentation fault) encountered in worker"
        r"|DataLoader timed out after (?P<timeout_s>\d+) seconds"
        r"|unable to open shared memory object|unable to write to file </torch_\w+>"
        r"|Communication with the workers is no longer possible",
        [
            "RuntimeError: DataLoader worker (pid 4012) is killed by signal: Bus error. It is possible that "
            "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
            "RuntimeError: DataLoader worker (pid(s) 812, 813) exited unexpectedly",
            "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared "
            "memory (shm).",
        ],
    ),
)
