"""CUDA and driver messages from PyTorch, JAX/XLA, NCCL and nvidia-smi.

Patterns quote the error as the runtime prints it ("CUDA out of memory. Tried to allocate",
"CUDA error: out of memory"), never the bare words, so a log that merely talks about
avoiding out-of-memory errors does not read as one.
"""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

OUT_OF_MEMORY = "cuda.out-of-memory"
HANDLED_OUT_OF_MEMORY = "cuda.out-of-memory-handled"
NO_DEVICE = "cuda.no-device"
# NGC containers' start-up banner, and TensorFlow/XLA's stream_executor diagnostics (`failed call to cuInit`,
# `kernel driver does not appear to be running on this host`): printed on every start without a driver, also
# where CPU-only was meant.
DRIVER_NOT_DETECTED_BANNER = "cuda.driver-not-detected-banner"
PYTORCH_DATALOADER = "torch.dataloader-died"

PATTERNS = (
    pattern(
        OUT_OF_MEMORY,
        [
            "CUDA out of memory",
            "rror: out of memory",
            "runtime error (2) : out of memory",
            "failed: out of memory",
            "(2 vs. 0)",
            "OutOfMemoryError: ",
            "hipErrorOutOfMemory",
            "CUDA_ERROR_OUT_OF_MEMORY",
            "cudaErrorMemoryAllocation",
            "CUBLAS_STATUS_ALLOC_FAILED",
            # The XLA status alone: a terminal may wrap the rest of its message onto the next line.
            "RESOURCE_EXHAUSTED",
            "Cuda failure 'out of memory'",
            "Cuda failure 2 'out of memory'",
            "HIP out of memory",
            "CUDNN_STATUS_ALLOC_FAILED",
            "OOM when allocating tensor",
            "No available memory for the cache blocks",
            "ran out of memory trying to allocate",
            "Resource exhausted: ",
            "ResourceExhaustedError: failed to allocate memory",
            "Out of memory error on GPU",
            "error=2 : out of memory",
            "out of memory to allocate",
            "Out of memory allocating",
            "NPU out of memory",
            "out of memory errno:",
            "is more than total mem size",
            "bad_alloc: out_of_memory",
            "CUDA failure 2: out of memory",
            "error == cudaSuccess. 2 vs 0.",
            "cudaSuccess CUDA: out of memory",
        ],
        r"(?:CUDA|HIP|NPU) out of memory\. Tried to allocate (?P<tried>[\d.]+ [KMGT]i?B)"
        r"(?:.*?GPU (?P<gpu>\d+)(?:;| has a total capacity of) (?P<total>[\d.]+ [KMGT]i?B))?"
        r"(?:.*?(?:of which|;) (?P<free>[\d.]+ [KMGT]i?B) (?:is )?free)?"
        r"(?:.*?(?P<reserved_unallocated>[\d.]+ [KMGT]i?B) is reserved by PyTorch but unallocated)?"
        r"|(?:Error|Exception)\)?: CUDA (?:(?:driver )?error: )?out of memory(?!\. Tried)"
        # Every generation's words: PyTorch 0.4's `cuda runtime error (2)`, darknet's `CUDA Error: out of memory`,
        # MXNet's and Caffe's cudaMalloc checks, and torch's own OutOfMemoryError whatever its message (a
        # per-process memory fraction says `Allocation on device 0 would exceed allowed memory`).
        r"|cuda runtime error \(2\) : out of memory|(?:CUDA|Cuda) [Ee]rror: out of memory|hipErrorOutOfMemory"
        r"|cudaMalloc(?: retry)? failed: out of memory|error == cudaSuccess \(2 vs\. 0\)\s+out of memory"
        r"|\btorch\.(?:cuda\.)?OutOfMemoryError: (?!CUDA out of memory\. Tried)"
        r"|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED"
        r"|RESOURCE_EXHAUSTED: Out of memory|Cuda failure (?:2 )?'out of memory'|CUDNN_STATUS_ALLOC_FAILED"
        r"|OOM when allocating tensor|No available memory for the cache blocks"
        # The BFC allocator of JAX/XLA and TensorFlow; TensorFlow also prints its line for an allocation it can do
        # without (`The caller indicates that this is not a failure`), which is only a hint about speed.
        r"|Allocator \([\w:]+\) ran out of memory trying to allocate (?P<bfc_tried>[\d.]+ ?[KMGTP]?i?B)"
        r"(?!.*this is not a failure)"
        r"|XlaRuntimeError: RESOURCE_EXHAUSTED|(?:RESOURCE_EXHAUSTED|Resource exhausted): (?:Out of memory|Failed to "
        r"allocate request)|ResourceExhaustedError: failed to allocate memory"
        # PaddlePaddle's allocator, on a line of its own after `BadAlloc, ResourceExhaustedError:`.
        r"|Out of memory error on GPU \d+\. Cannot allocate [\d.]+ ?[KMGT]?i?B memory on GPU \d+"
        # PyTorch's THC before 1.0 (`THCudaCheck FAIL ... error=2 : out of memory`) and CuPy's pool, as Chainer
        # shows it.
        r"|THCudaCheck FAIL .*\berror=2 : out of memory"
        r"|\bout of memory to allocate \d+ bytes|\bOut of memory allocating [\d,]+ bytes"
        # Paddle Fluid's glog fatal after a CUDA call (`cudaGetLastError out of memory errno:2`), its enforce
        # message (`PaddleCheckError: out of memory at [...device_context.cc:219]`) and MindSpore's device allocator.
        r"|\bout of memory errno:2\b|\bPaddle\w*Error: out of memory at \["
        r"|plus alloc size : \d+ is more than total mem size"
        # RAPIDS' RMM device allocator (cuDF, XGBoost on dask-cuda), whatever wraps it: a C++ bad_alloc whose
        # message names the device, not the host's RAM.
        r"|\bstd::bad_alloc: out_of_memory: (?:CUDA error|RMM failure)\b"
        # Before 2020 each framework checked CUDA in its own words: CNTK's `CUDA failure 2: out of memory ; GPU=0`,
        # Caffe2's enforce (`error == cudaSuccess. 2 vs 0. Error at: <file>: out of memory`), mshadow's check in
        # MXNet (`Check failed: e == cudaSuccess CUDA: out of memory`).
        r"|\bCUDA failure 2: out of memory\b|\berror == cudaSuccess\. 2 vs 0\. Error at: \S+: out of memory"
        r"|\be == cudaSuccess:? CUDA: out of memory",
        [
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
            "of 79.15 GiB of which 1.23 GiB is free. Process 1234 has 77.9 GiB memory in use. Of the allocated "
            "memory 70.1 GiB is allocated by PyTorch, and 6.2 GiB is reserved by PyTorch but unallocated.",
            "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; "
            "14.1 GiB already allocated; 3.19 MiB free; 14.4 GiB reserved in total by PyTorch)",
            "RuntimeError: CUDA error: out of memory",
            "RuntimeError: CUDA driver error: out of memory",
            "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/generic/THCStorage.cu:58",
            "CUDA Error: out of memory",
            "mxnet.base.MXNetError: [10:00:00] src/storage/./pooled_storage_manager.h:157: cudaMalloc failed: out of "
            "memory",
            "F0101 10:00:00.000000 1234 syncedmem.cpp:56] Check failed: error == cudaSuccess (2 vs. 0)  out of memory",
            "torch.cuda.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)",
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
            "4294967296 bytes.",
            "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
            "shape[64,1024,1024] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine.",
            "2025-03-23 20:28:59.832181: W external/xla/xla/tsl/framework/bfc_allocator.cc:501] Allocator (GPU_0_bfc) "
            "ran out of memory trying to allocate 1.25TiB (rounded to 1374521760000)requested by op ",
            "2020-06-01 20:08:08.012345: W tensorflow/core/common_runtime/bfc_allocator.cc:431] Allocator (GPU_0_bfc) "
            "ran out of memory trying to allocate 256.00MiB (rounded to 268435456).  Current allocation summary "
            "follows.",
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for 1.00GiB "
            "(1073741824B) on device ordinal 0",
            "RuntimeError: Resource exhausted: Out of memory while trying to allocate 12582912 bytes.",
            "ResourceExhaustedError: failed to allocate memory [Op:AddV2]",
            "Out of memory error on GPU 0. Cannot allocate 48.473877MB memory on GPU 0, 7.900513GB memory has been "
            "allocated and available memory is only 29.437500MB.",
            "THCudaCheck FAIL file=/pytorch/torch/lib/THC/generic/THCStorage.cu line=58 error=2 : out of memory",
            "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/torch/lib/THC/generic/THCStorage.cu:58",
            "F0903 14:31:26.106397 92421 syncedmem.cpp:56] Check failed: error == cudaSuccess (2 vs. 0)  out of memory",
            "[17:36:58] src/storage/./pooled_storage_manager.h:111: cudaMalloc failed: out of memory",
            "Exception in main training loop: out of memory to allocate 205520896 bytes (total 16068929536 bytes)",
            "Exception in main training loop: Out of memory allocating 25,600,000 bytes (allocated so far: "
            "3,635,267,072 bytes).",
            "xgboost.core.XGBoostError: [02:14:02] /src/common/device_helpers.cuh:393: Memory allocation error on "
            "worker 0: std::bad_alloc: out_of_memory: CUDA error at: /opt/conda/include/rmm/mr/device/"
            "cuda_memory_resource.hpp",
            "MemoryError: std::bad_alloc: out_of_memory: RMM failure at:/opt/conda/include/rmm/mr/device/"
            "pool_memory_resource.hpp:196: Maximum pool size exceeded",
            "RuntimeError: CUDA failure 2: out of memory ; GPU=0 ; hostname=node0 ; expr=cudaMalloc((void**) "
            "&deviceBufferPtr, sizeof(AllocatedElemType) * numElements)",
            "RuntimeError: [enforce fail at event_gpu.cc:17] error == cudaSuccess. 2 vs 0. Error at: "
            "/opt/caffe2/core/event_gpu.cc:17: out of memory",
            "  what():  [17:54:40] /mxnet/3rdparty/mshadow/mshadow/./stream_gpu-inl.h:198: Check failed: e == "
            "cudaSuccess CUDA: out of memory",
        ],
        wraps=True,
    ),
    # A trainer that catches the OOM, logs it and goes on (fairseq skips the batch, an automatic batch-size
    # finder halves the batch) prints the OOM text inside its own warning: that line did not stop the run.
    pattern(
        HANDLED_OUT_OF_MEMORY,
        [
            "ran out of memory with exception",
            "Ran out of memory with exception",
            "attempting to recover from OOM",
            "skipping batch",
        ],
        r"(?P<handled>[Rr]an out of memory with exception|attempting to recover from OOM"
        # fairseq before 0.6, on the line after the allocator's own message
        r"|ran out of memory on GPU #?\d+, skipping batch)",
        [
            "| WARNING: ran out of memory with exception: CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0; "
            "15.75 GiB total capacity; 11.71 GiB already allocated; 584.94 MiB free; 2.38 GiB cached);",
            "2021-03-01 10:00:00 | WARNING | fairseq.trainer | OOM: Ran out of memory with exception: CUDA out of "
            "memory. Tried to allocate 2.00 GiB",
            "| WARNING: ran out of memory on GPU #2, skipping batch",
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
            "Failed to initialize NVML",
            "Unexpected error from cudaGetDeviceCount",
            "CUDA driver initialization failed",
            "is/are busy or unavailable",
            "No devices found. Waiting indefinitely",
            "could not select device driver",
            "No NVIDIA GPU found",
            "Torch not compiled with CUDA enabled",
            "only supports GPUs",
            "VolumeDriver.Create: internal error",
            "volume plugin nvidia-docker",
            "Unknown runtime specified nvidia",
            "Cannot init NVML library",
            '"nvidia-smi": executable file not found',
            'nvidia-smi\\": executable file not found',
            "system not yet initialized",
            "Could not resolve Linux kernel version",
            "No supported gpu backend found",
            "can not run on your system since the accelerator is not available",
            "hostPath type check failed",
            "No HIP GPUs are available",
            "machine only has: []",
            'no runtime for "nvidia',
            'RuntimeHandler "nvidia',
            "Unable to load the kernel module",
            "nvidia-container-runtime-hook",
            "nvidia-cdi-hook",
            "Incompatible strategy detected",
            "Incompatible platform detected",
            "is too old to support hea",
            "error=30 : unknown error",
            "cuda runtime error (30)",
            "no NVIDIA devices found",
            "No supported device detected",
        ],
        # Libraries on top of torch say it in their own words (Unsloth's `No NVIDIA GPU found?`), and a CPU-only
        # torch wheel asserts `Torch not compiled with CUDA enabled`.
        r"(?P<error>No CUDA GPUs are available|no CUDA-capable device is detected|Found no NVIDIA driver"
        r"|No NVIDIA GPU found|Torch not compiled with CUDA enabled|\bonly supports (?:NVIDIA )?GPUs\b"
        r"|CUDA driver version is insufficient for CUDA runtime version"
        r"|NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
        r"|The NVIDIA driver on your system is too old|Driver/library version mismatch"
        r"|cudaErrorNoDevice|CUDA_ERROR_NO_DEVICE|torch\.cuda\.is_available\(\) is False"
        r"|^\s*No devices were found\s*$|nvidia-container-cli(?:\.real)?: (?:initialization|requirement) error.*"
        r"|CUDA available: False|cuda\.is_available\(\): False|CUDA is not available"
        r"|could not load NVML library|did you configure the NVIDIA Container Toolkit"
        r"|CUDA initialization: CUDA unknown error|Setting the available devices to be zero"
        r"|Failed to initialize NVML\b.*|Unexpected error from cudaGetDeviceCount\(\).*"
        # dcgm-exporter 4.x's own words, and a container the toolkit gave no driver binaries (the GPU Operator's
        # toolkit validator escapes the quotes in its logfmt message).
        r"|Cannot init NVML library; err: \w+|(?:exec: )?\\?\"nvidia-smi\\?\": executable file not found in \$PATH"
        # CUDA error 802 in any tool's words (NVSwitch systems whose fabric manager is not running), and the GPU
        # Operator's driver container that found no driver packages for the node's kernel.
        r"|\bsystem not yet initialized\b|Could not resolve Linux kernel version"
        r"|No devices found\. Waiting indefinitely|could not select device driver .*"
        # A device another process holds in exclusive mode, or that the driver could not bring up.
        r"|CUDA driver initialization failed|CUDA-capable device\(s\) is/are busy or unavailable"
        # nvidia-docker 1.0, whose plugin mounts the driver as a volume, and 2.0, whose runtime docker must be told
        # about.
        r"|Unknown runtime specified nvidia\b.*"
        r"|create nvidia_driver_[\d.]+: .*(?:VolumeDriver\.Create: internal error|volume plugin nvidia-docker).*"
        # PyTorch Lightning's accelerator connector, 1.6-1.7 (`GPUAccelerator`) and 1.8+ (`CUDAAccelerator`, `No
        # supported gpu backend found!`).
        r"|No supported gpu backend found!?|(?:GPU|CUDA)Accelerator can not run on your system since the accelerator "
        r"is not available"
        # GKE mounts the node's driver into GPU pods from a hostPath its driver installer fills: a node whose
        # installer never ran fails the pod's mount of that volume.
        r"|MountVolume\.SetUp failed for volume \"nvidia[\w-]*\" : hostPath type check failed: \S*nvidia\S* is not a "
        r"directory"
        # torch's ROCm build on a machine whose GPU it cannot drive (an AMD wheel in an image run on NVIDIA).
        r"|No HIP GPUs are available"
        # Lightning < 1.6 comparing the requested GPU ids with the ones it sees, and Singularity/Apptainer's `--nv`
        # set up through nvidia-container-cli on a host without libnvidia-container's tools.
        r"|\bBut your machine only has: \[\]"
        r"|stat \S*nvidia-container-cli: no such file or directory"
        # The node's container runtime has no handler for the `nvidia` RuntimeClass (containerd, and CRI-O or
        # cri-dockerd), or the toolkit's OCI hook fails (CRI-O, podman): pods asking for it never get a GPU.
        r'|no runtime for "nvidia[\w-]*" is configured|RuntimeHandler "nvidia[\w-]*" not supported'
        r"|error executing hook `?\S*nvidia-(?:container-runtime|cdi)-hook`? \(exit code: \d+\)"
        # The driver installer (the GPU Operator's driver container, a host install) could not load the module.
        r"|Unable to load the kernel module '?nvidia[\w-]*\.ko'?"
        # The device plugin (0.15+) found neither NVML nor Tegra, or (1.x) refused a GPU it cannot health-check.
        r"|Incompatible (?:strategy|platform) detected\b.*|GPU with UUID \S+ is too old to support hea\w*checking"
        # PyTorch before 1.3 and Lua Torch initialising CUDA in THCGeneral: error 30 (`unknown error`) there is a
        # driver whose devices were never set up (after an upgrade, a suspend); libcuda's own line says it plainly.
        r"|THCudaCheck FAIL file=\s*\S*THCGeneral\.c(?:pp)? line=\d+ error=30 : unknown error"
        r"|cuda runtime error \(30\) : unknown error at \S*THCGeneral\.c(?:pp)?:\d+|\bNVIDIA: no NVIDIA devices found"
        # vLLM <= 0.5's DeviceConfig, in a Ray actor that was given no GPU of its own.
        r"|No supported device detected)",
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
            "Failed to initialize NVML: Unknown Error",
            "Error: Failed to initialize NVML",
            'time=2026-09-19T20:06:59.547Z level=ERROR msg="Cannot init NVML library; err: ERROR_LIBRARY_NOT_FOUND"',
            "stderr: nvidia-container-cli.real: initialization error: driver error: failed to process request: unknown",
            'time="2021-10-07T15:16:34Z" level=info msg="Error: error validating toolkit installation: exec: '
            '\\"nvidia-smi\\": executable file not found in $PATH"',
            "Failed to allocate device vector A (error code system not yet initialized)!",
            "Could not resolve Linux kernel version",
            "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
            "functions before calling NumCudaDevices() that might have already set an error? Error 802: system not "
            "yet initialized",
            "I0523 10:00:00.000000 1 main.go:256] No devices found. Waiting indefinitely.",
            'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
            "NotImplementedError: Unsloth: No NVIDIA GPU found? Unsloth currently only supports GPUs!",
            "RuntimeError: No supported device detected.",
            "AssertionError: Torch not compiled with CUDA enabled",
            "RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.",
            "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
            "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
            "installed a driver from http://www.nvidia.com/Download/index.aspx",
            "docker: Error response from daemon: create nvidia_driver_396.24: VolumeDriver.Create: internal error, "
            "check logs for details.",
            "docker: Error response from daemon: Unknown runtime specified nvidia.",
            "lightning.fabric.utilities.exceptions.MisconfigurationException: No supported gpu backend found!",
            'MisconfigurationException("GPUAccelerator can not run on your system since the accelerator is not '
            "available. The following accelerator(s) is available and can be passed into `accelerator` argument of "
            "`Trainer`: ['cpu'].\")",
            'Warning  FailedMount  28s (x15 over 14m)   kubelet  MountVolume.SetUp failed for volume "nvidia" : '
            "hostPath type check failed: /home/kubernetes/bin/nvidia is not a directory",
            "RuntimeError: No HIP GPUs are available",
            "  Warning  FailedCreatePodSandBox  12s (x10 over 2m11s)  kubelet  Failed to create pod sandbox: rpc "
            'error: code = Unknown desc = failed to get sandbox runtime: no runtime for "nvidia" is configured',
            'Failed to create pod sandbox: rpc error: code = Unknown desc = RuntimeHandler "nvidia" not supported',
            "Error: container create failed: error executing hook `/usr/local/nvidia/toolkit/nvidia-container-runtime-"
            "hook` (exit code: 1)",
            "ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most",
            "E0506 17:45:45.421956       1 factory.go:112] Incompatible strategy detected auto",
            "2018/02/27 16:43:50 Warning: GPU with UUID GPU-edae6d5d is too old to support healtchecking with error: "
            "%!s(MISSING). Marking it unhealthy",
            '\\"nvidia-smi\\": executable file not found in $PATH": unknown.',
            "THCudaCheck FAIL file=/b/wheel/pytorch-src/torch/lib/THC/THCGeneral.c line=66 error=30 : unknown error",
            "RuntimeError: cuda runtime error (30) : unknown error at ..\\aten\\src\\THC\\THCGeneral.cpp:74",
            "NVIDIA: no NVIDIA devices found",
        ],
    ),
    pattern(
        DRIVER_NOT_DETECTED_BANNER,
        ["NVIDIA Driver was not detected", "failed call to cuInit", "kernel driver does not appear to be running"],
        r"(?P<error>The NVIDIA Driver was not detected\.\s+GPU functionality will not be available\.?"
        r"|failed call to cuInit: (?!CUDA_ERROR_NO_DEVICE).*|kernel driver does not appear to be running on this host)",
        [
            "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.",
            "2021-12-07 10:41:27.740947: W tensorflow/stream_executor/cuda/cuda_driver.cc:326] failed call to cuInit: "
            "UNKNOWN ERROR (303)",
            "E tensorflow/stream_executor/cuda/cuda_driver.cc:509] failed call to cuInit: CUDA_ERROR_UNKNOWN",
            "I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:156] kernel driver does not appear to be running on "
            "this host (worker-1): /proc/driver/nvidia/version does not exist",
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
            "bytes from file </torch_",
            "Communication with the workers is no longer possible",
        ],
        # Retyped from a screenshot the `(pid N)` is often left out.
        r"DataLoader worker (?:\(pid(?:\(s\))? (?P<pid>[\d, ]+)\) )?(?:is killed by signal: (?P<signal>[\w ]+?)\.?"
        r"(?:\s|$)|exited unexpectedly)"
        r"|Unexpected (?P<fault>bus error|segmentation fault) encountered in worker"
        r"|DataLoader timed out after (?P<timeout_s>\d+) seconds"
        r"|unable to open shared memory object|unable to write to file </torch_\w+>"
        r"|unable to mmap \d+ bytes from file </torch_\w+>"
        r"|Communication with the workers is no longer possible",
        [
            "RuntimeError: DataLoader worker (pid 4012) is killed by signal: Bus error. It is possible that "
            "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
            "RuntimeError: DataLoader worker (pid(s) 812, 813) exited unexpectedly",
            "RuntimeError: DataLoader worker is killed by signal: Bus error",
            "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared "
            "memory (shm).",
            "Unexpected bus ERROR encountered in worker. This might be caused by insufficient Shared memory (SHM)",
            "RuntimeError: unable to mmap 1048576 bytes from file </torch_2362_1823389071_0>: Cannot allocate memory "
            "(12)",
        ],
        # People retype these messages into issues (through translators, too) with the capitals changed.
        caseless=True,
    ),
)
