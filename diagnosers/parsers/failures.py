"""Generic failure lines: a fatal log line, or a process that recorded a non-zero exit.

These say that something failed without saying why; the unrecognised rule quotes them when no other rule knows the
cause. A process killed by a signal says a little more (the workers rule reads it): torchrun's `failed (exitcode: -9)`
and ChildFailedError summary, its agent's `Received 1 death signal` and `SignalException: Process N got signal: 1`,
subprocess's `died with <Signals.SIGKILL: 9>`, and launchers in their own words: MPICH/Hydra's and Intel MPI's `BAD
TERMINATION` box (`= EXIT CODE: 9`, which is the signal's number, `= KILLED BY SIGNAL: 9 (Killed)`, `EXIT STRING:
Killed (signal 9)`), Open MPI's `exited on signal 9 (Killed)`, srun's `task 3: Killed`, DeepSpeed's `exits with return
code = -11`. A shell or container runtime reports SIGKILL from outside too (a line of its own `Killed` in the locale's
words, zsh's `killed`, exit code 137, Go's `signal: killed`): that is the same signal, but it names no worker, so the
workers rule leaves it to the memory rule's guess at the OOM killer. An exit code of -15 is left out: the elastic
agent sends SIGTERM to the surviving ranks once one has failed, so it names no cause; signal 2 (SIGINT) is a person
pressing Ctrl-C, not a worker dying.

An exception's own line (`ValueError: ...`, `torch.distributed.DistBackendError: ...`) is fatal even where no
`Traceback (most recent call last):` header led to it: a paste that began below the header, or a launcher that
printed only the last line. Its frames are the `File "...", line N` lines just above it from the same process.
A line logged below ERROR (`... - WARNING - ValueError: ...`) reports an error the run survived. A
`Traceback (most recent call last):` header is kept as a signal of its own: a paste cut after the frames has no
exception line, and the header is then the only word that something raised.

A native abort ends the process with no Python traceback: the C++ runtime's `terminate called after throwing an
instance of 'c10::Error'` and its `  what():  CUDA error: ...`, the shell's `Aborted (core dumped)`.

`non-fatal` and `not fatal` are not fatal lines. `Fatal Python error` and
`exit code 139` are left to kernel.PROCESS_CRASH, which shares their first word: the scanner's regex
fallback reports one needle where two start at the same place.
"""

from __future__ import annotations

import re
import signal as signals_module
from collections.abc import Sequence

from diagnosers.findings import Quote
from diagnosers.parsers.prefixes import process_key, split_prefix
from diagnosers.parsers.signals import Signal, pattern
from diagnosers.parsers.tracebacks import FRAME, HEADER, Frame, PythonException

FATAL_LINE = "failure.fatal-line"
NONZERO_EXIT = "failure.nonzero-exit"
KILLED_BY_SIGNAL = "failure.killed-by-signal"
EXCEPTION_LINE = "failure.exception-line"
TRACEBACK_FRAME = "failure.traceback-frame"
TRACEBACK_HEADER = "failure.traceback-header"
NATIVE_ABORT = "failure.native-abort"
# The run's own word that it ended well; a warning printed near it did not stop it.
RUN_SUCCEEDED = "failure.run-succeeded"
# An MPI launcher that lost the daemon on another node: that node's process or pod died.
LAUNCHER_LOST_DAEMON = "failure.launcher-lost-daemon"

# A frame's code line and Python 3.11's `^^^^` line come between two frames, or between the last and the exception.
FRAME_GAP = 3
_QUIET_LEVEL = re.compile(r"\b(?:DEBUG|INFO|WARN(?:ING)?)\b")

# glibc's strsignal(SIGKILL), which bash prints for a SIGKILLed child, in the locales of most pasted logs (Chinese,
# Japanese, Korean, German, French, Spanish, Polish). Each word is one more needle on every line of every log: the
# other two dozen translations cost the realistic benchmark 7% for threads hardly ever seen, the two Cyrillic ones
# alone 3% of the scan.
_SIGKILL_WORDS = (
    "Killed",
    "已杀死",
    "強制結束",
    "強制終了",
    "죽었음",
    "Getötet",
    "Processus arrêté",
    "Terminado (killed)",
    "Zabit (SIGKILL)",
)
_SIGKILL_WORD = "|".join(re.escape(word) for word in _SIGKILL_WORDS)

PATTERNS = (
    pattern(
        FATAL_LINE,
        ["FATAL", "Fatal", "fatal"],
        r"(?<![\w-])(?<!not )(?:FATAL|[Ff]atal)(?:\b(?![=(]| Python error)|$)",
        [
            "2024-06-11 09:14:02,118 FATAL train.py:212 -- checkpoint manifest s3://ckpt/run-7/manifest.json is "
            "corrupt",
            "F0611 09:14:02.118 fatal error: unsupported tokenizer vocabulary size 50304",
            "[FATAL] Unable to restore optimizer state: shape mismatch",
        ],
    ),
    pattern(
        NONZERO_EXIT,
        [
            "exit code",
            "exit status",
            "exited with code",
            "exitcode",
            "Exit code",
            "EXIT CODE",
            "exits with return code",
        ],
        r"(?i:exit(?:ed with)? ?(?:code|status)|exitcode|exits with return code)"
        r"\s*[:=]?\s*(?P<code>-?(?!139\b)[1-9]\d*)\b",
        [
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: exitcode  : 1 (pid: 4711)",
            "  exitcode  : 1 (pid: 4711)",
            "Job 'raysubmit_Q2' exited with code 1",
            "subprocess.CalledProcessError: Command '['python', 'prep.py']' returned non-zero exit status 2.",
            "[2024-03-04 10:00:01,100] [ERROR] [launch.py:321:sigkill_handler] ['python', 'train.py'] exits with "
            "return code = 1",
        ],
    ),
    pattern(
        KILLED_BY_SIGNAL,
        [
            "exitcode",
            "received by PID",
            "got signal:",
            "death signal",
            "died with <Signals.",
        ],
        r"(?:(?:failed \(exitcode: |exitcode\s*: )-(?!15\b)"
        r"|SignalException: Process \d+ got signal: |Signal (?=\d+ \(SIG\w+\) received by PID)"
        r"|Received (?=\d+ death signal)"
        r"|died with <Signals\.SIG\w+: )(?!2\b)(?P<signal>\d+)",
        [
            "E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed "
            "(exitcode: -9) local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python",
            "  exitcode  : -11 (pid: 3309)",
            "  traceback : Signal 9 (SIGKILL) received by PID 14750",
            "torch.distributed.elastic.multiprocessing.api.SignalException: Process 8665 got signal: 1",
            "WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers",
            "subprocess.CalledProcessError: Command '['python', 'train.py']' died with <Signals.SIGSEGV: 11>.",
        ],
    ),
    # A shell, a container runtime, an MPI launcher, srun or DeepSpeed's launcher reports a process's end from
    # outside it (DeepSpeed's `-9` is the OOM killer as often as torchrun's `exitcode: -9` is). After
    # kernel.PROCESS_CRASH: the regex fallback reports the first needle listed where two start at one place, and
    # "exit code 139" must win over "exit code".
    pattern(
        KILLED_BY_SIGNAL,
        [
            "EXIT CODE",
            "KILLED BY SIGNAL",
            "(signal ",
            "exited on signal",
            ": Killed",
            "exits with return code",
            *_SIGKILL_WORDS,
            "zsh: killed",
            " killed ",
            "signal: killed",
            "exit code",
            "exit status",
            "exited with code",
            "exitcode",
            "Exit code",
            "Exit Code",
            "exitCode",
            "Exited (137)",
            "signal SIGKILL",
            "Signals.SIGKILL",
        ],
        # Hydra reports a signalled rank's signal as its exit code; other codes there are the rank's own exit.
        r"(?:^=\s+EXIT CODE: (?=(?:6|7|9|11)\s*$)|^=\s+KILLED BY SIGNAL: |EXIT STRING: .*\(signal (?=\d+\))"
        r"|\bexited on signal |exits with return code = -(?!15\b))(?!2\b)(?P<launcher_signal>\d+)"
        r"|^srun: error: \S+: tasks? [\d,-]+: (?P<killed>Killed)\s*$"
        # SIGKILL in a shell's words (a `Killed` inside other text, "Killed process", is none, but one glued to the
        # tqdm bar that held the cursor, `35.73s/it]Killed`, is), as exit code 137 (128 + 9) or -9, and in Go's and
        # multiprocessing's words; torchrun's exitcode and subprocess's `died with` are the pattern above.
        rf"|(?P<sigkill>^\s*(?:{_SIGKILL_WORD})\s*$|(?<=\])(?:{_SIGKILL_WORD})\s*$"
        rf"|: line \d+:\s+\d+ (?:{_SIGKILL_WORD})(?:\s+(?P<command>\S.*)|\s*$)"
        r"|^zsh: killed\s+(?P<zsh_command>\S.*)|^\[\d+\]\s*[+-]?\s+(?:\d+\s+)?[Kk]illed\s+(?P<job_command>\S.*)"
        r"|(?!exitcode\s*: -)(?i:exit(?:ed with)?[ _]?(?:code|status)|exitcode)\W{0,3}\s*(?P<code>137|-9)\b"
        r"|Exited \(137\)|terminated with signal SIGKILL|(?<!died with <)Signals\.SIGKILL|\bsignal: killed\b)",
        [
            "=   EXIT CODE: 9",
            "=   KILLED BY SIGNAL: 9 (Killed)",
            "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Segmentation fault (signal 11)",
            "mpirun noticed that process rank 3 with PID 123 on node node01 exited on signal 9 (Killed).",
            "[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', "
            "'main.py'] exits with return code = -9",
            "srun: error: gpu-node-07: task 3: Killed",
            "Killed",
            "Loading checkpoint shards:  38%|███▊      | 3/8 [00:02<00:03,  1.28it/s]Killed",
            "已杀死",
            "/var/spool/slurmd/job00191/slurm_script: line 28:  8156 Killed                  python3 main.py",
            "zsh: killed     python train.py --bs 64",
            "[1]    16261 killed     python3 -m llama.convert_llama --model_size 65B",
            "[1]+  Killed                  python train.py",
            "      Exit Code:    137",
            "train-worker-0   Exited (137) 2 minutes ago",
            "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL",
            "Error: llama runner process has terminated: signal: killed",
        ],
    ),
    pattern(
        EXCEPTION_LINE,
        ["Error:", "Exception:", "Interrupt:", "Exit:", "Error):", "Exception):", "(see above for traceback):"],
        # A class name, not prose: `Error: 0 warnings` has no name before the suffix, a docstring's `Raises:`
        # entry is indented.
        r"^(?P<type>(?:[A-Za-z_]\w*\.)*_?[A-Z]\w*(?:Error|Exception|Interrupt|Exit)(?:\([\w.]+\))?)"
        # TensorFlow 1.x's session repeats the op's error below the graph's traceback with this aside.
        r"(?: \(see above for traceback\))?:(?: (?P<message>.*))?$",
        [
            "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.",
            "(pid=runtime_env, ip=10.0.0.7) ValueError: Local directory /tmp/ray/runtime_resources/pip/4950 does not "
            "exist on the cluster.",
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275",
            "ray.exceptions.RayTaskError(ValueError): ray::train_fn() (pid=311, ip=10.0.0.5)",
            "InvalidArgumentError (see above for traceback): Integer division by zero",
        ],
    ),
    pattern(
        NATIVE_ABORT,
        ["terminate called after throwing", "what():", "Aborted (core dumped)"],
        r"terminate called after throwing an instance of '(?P<type>[^']+)'|^\s*what\(\):\s+(?P<message>\S.*)"
        r"|\bAborted \(core dumped\)",
        [
            "terminate called after throwing an instance of 'c10::Error'",
            "  what():  CUDA error: an illegal memory access was encountered",
            "terminate called after throwing an instance of 'std::runtime_error'",
            "/bin/bash: line 1:  4711 Aborted (core dumped) python train.py",
        ],
    ),
    pattern(
        RUN_SUCCEEDED,
        [
            "success!",
            "SUCCESS!",
            "raining finished",
            "raining completed",
            "raining complete",
            "raining done",
            "Finished training",
            "succeeded",
            "SUCCEEDED",
        ],
        r"^(?:success|SUCCESS)!\s*$|\b[Tt]raining (?:finished|complete[d.]?|done)(?:\s|[.!]|$)|\bFinished training\b"
        r"|\bJob '?[\w-]+'? succeeded\b|(?:Status for job|Job) '[\w-]+': SUCCEEDED\b",
        [
            "success!",
            "Training finished. Final loss 0.412",
            "2024-05-01 10:00:00 INFO Training completed in 3h 12m",
            "Job 'raysubmit_V3pgxPzLr1d8vXJc' succeeded",
            "Status for job 'raysubmit_V3pgxPzLr1d8vXJc': SUCCEEDED",
        ],
    ),
    pattern(
        TRACEBACK_FRAME,
        ['File "'],
        FRAME.pattern,
        ['  File "/usr/lib/python3/site-packages/ray/_private/runtime_env/pip.py", line 542, in modify_context'],
    ),
    pattern(TRACEBACK_HEADER, [HEADER], re.escape(HEADER), [HEADER, "[rank1]: " + HEADER]),
    # Slurm ended the job or step from outside: its wall-time limit ran out, its node failed or it was preempted.
    # A plain `CANCELLED AT <time> ***` is someone's scancel and is left out.
    pattern(
        NONZERO_EXIT,
        ["CANCELLED AT"],
        r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+ DUE TO (?P<reason>TIME LIMIT|NODE FAILURE|PREEMPTION)\b",
        [
            "slurmstepd: error: *** JOB 494583 ON ... CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME LIMIT ***",
            "slurmstepd: error: *** STEP 1234.0 ON gpu-07 CANCELLED AT 2024-04-20T09:09:37 DUE TO NODE FAILURE ***",
        ],
    ),
    # Open MPI's ORTE (4.x and older) and PRRTE (5.x) on a remote daemon that vanished, as MPIJob launchers print it.
    pattern(
        LAUNCHER_LOST_DAEMON,
        ["lost communication with a remote daemon"],
        r"(?P<what>\b(?:ORTE|PRTE|PRRTE) has lost communication with a remote daemon)",
        ["ORTE has lost communication with a remote daemon.", "PRTE has lost communication with a remote daemon."],
    ),
    # Slurm could not start the job at all: the step's program could not be executed on the node, the job container
    # plugin could not join the job's namespace, the node's prolog failed and the allocation was revoked.
    pattern(
        FATAL_LINE,
        ["execve():", "container_g_join failed", "Prolog failure", "has been revoked"],
        r"(?P<what>\bslurmstepd(?:-\S+)?: error: (?:execve\(\)|container_g_join failed): .*"
        r"|\b(?:salloc|srun|sbatch): (?:error: )?(?:Prolog failure on node \S+|Job allocation \d+ has been revoked))",
        [
            "slurmstepd: error: execve(): /tmp/slurmd/job00089/slurm_script: No such file or directory",
            "slurmstepd: error: container_g_join failed: 119383",
            "salloc: Prolog failure on node k003-006",
            "salloc: error: Job allocation 235454 has been revoked",
        ],
    ),
    # Go programs of the Kubernetes stack: a klog/glog line of severity F, which Fatalf writes before the process
    # exits, and a controller-runtime (zap console) ERROR line, on which an operator gave up on an object (a pod it
    # could not create, a child Job the API server rejected). A conflict on a stale object is retried; left out.
    pattern(
        FATAL_LINE,
        [".go:", "\tERROR\t"],
        r"(?:^|\s)F\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w.-]+\.go:\d+\] (?P<message>\S.*)"
        r"|(?:^|\t)ERROR\t(?!.*\bthe object has been modified\b)(?P<error>\S.*)",
        [
            "F0503 14:02:46.124035     756 main.go:365] Failed to wait for worker container: unable to find main pid "
            "from the process list [1 756]",
            "2024-06-12T16:04:27.127Z\tERROR\tcontrollers.RayCluster\tServiceAccount foo is not found. Please create "
            'one.\t{"ServiceAccount": "data-processing/foo"}',
        ],
    ),
    # The kubelet refusing a pod at admission: it failed before it ran. The device rules name the causes they know
    # (the node's GPUs taken, a GPU lost); any other reason is quoted.
    pattern(
        FATAL_LINE,
        ["Allocate failed due to"],
        r"(?P<message>\bAllocate failed due to .*)",
        [
            "  message: Pod Allocate failed due to pod d65f09ad container wait-gcs-ready unable to find GPU device "
            "allocation by scheduler, which is unexpected",
        ],
    ),
    # A CUDA kernel's device-side assert (ATen's and THC's `file.cu:N: fn: block: [..], thread: [..] Assertion
    # `cond` failed.`): an index or label out of range in the program, which kills the process at its next CUDA
    # call; the GPU itself is fine.
    pattern(
        FATAL_LINE,
        ["] Assertion `"],
        r"\.cu:\d+: .*\bblock: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion `.+` failed",
        [
            "../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [22,0,0], thread: [64,0,0] Assertion "
            '`-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.',
            "/pytorch/aten/src/THC/THCTensorIndex.cu:361: void indexSelectLargeIndex(...): block: [1,0,0], thread: "
            "[0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
        ],
    ),
    # NCCL states an error of its own (not a network one) as `WARN Error : ...`: `no algorithm/protocol available`
    # when NCCL_ALGO/NCCL_PROTO name one the communicator cannot use (CollNet without its plugin).
    pattern(
        FATAL_LINE,
        ["WARN Error : "],
        r"(?:NCCL WARN|\.(?:cc|cu|h|c):\d+ WARN) Error : \S",
        [
            "201: :41367:41367 [1] enqueue.cc:422 NCCL WARN Error : no algorithm/protocol available",
            "dc:255756:255756 [3] enqueue.cc:1182 NCCL WARN Error : no algorithm/protocol available",
        ],
    ),
    # NCCL 2.3+ unwinds a failed communicator set-up as INFO lines `file:line -> <ncclResult>`, the init thread's last
    # one marked `[Async thread]`: init failed, whatever WARN above it said why (topology detection that cannot read
    # sysfs, as under WSL2).
    pattern(
        FATAL_LINE,
        ["[Async thread]"],
        r"NCCL INFO \S+\.(?:cc|cu):\d+ -> [1-9]\d* \[Async thread\]",
        [
            "node0:92777:92889 [0] NCCL INFO group.cc:73 -> 2 [Async thread]",
            "XXX:430:2237 [0] NCCL INFO misc/group.cu:69 -> 2 [Async thread]",
        ],
    ),
    # A package install that failed: pip finding no such package or version (a runtime_env's pip or conda list,
    # a setup command), and the conda env built around it; what the worker prints next (`No module named ...`) is
    # only its consequence.
    pattern(
        FATAL_LINE,
        ["No matching distribution found", "Pip failed"],
        r"(?P<what>\bERROR: No matching distribution found for \S+|\bCondaEnvException: Pip failed)",
        [
            "(raylet) ERROR: No matching distribution found for nonexistent-pkg-14792",
            "(raylet) CondaEnvException: Pip failed",
        ],
    ),
)


def signal_number(signal: Signal) -> int | None:
    """The signal a KILLED_BY_SIGNAL line names; srun's and a shell's `Killed`, exit code 137 are SIGKILL."""
    if signal.get("killed") or signal.get("sigkill"):
        return int(signals_module.SIGKILL)
    number = signal.get("signal") or signal.get("launcher_signal")
    return int(number) if number.isdigit() else None


def is_sigkill(signal: Signal) -> bool:
    """SIGKILL, whoever reported it: the OOM killer's signal, and a timeout's or a preemption's."""
    return signal_number(signal) == signals_module.SIGKILL


def reported_by_shell(signal: Signal) -> bool:
    """A shell or container runtime reported SIGKILL (`Killed`, exit code 137): the process may be any, not a worker."""
    return bool(signal.get("sigkill"))


def with_exceptions_without_header(signals: Sequence[Signal], read: Sequence[PythonException]) -> list[PythonException]:
    """The exceptions read from tracebacks, and those whose line no header led to, in the log's order."""
    taken = {exception.quote.line for exception in read}
    frames = {signal.quote.line: signal for signal in signals if signal.kind == TRACEBACK_FRAME}
    found = list(read)
    for signal in signals:
        if signal.kind != EXCEPTION_LINE or signal.quote.line in taken:
            continue
        text = signal.quote.text
        _, start = split_prefix(text)
        if _QUIET_LEVEL.search(text, 0, start):
            continue
        frames_above = _frames_above(frames, signal.quote, process_key(text, start))
        found.append(PythonException(signal.get("type"), signal.get("message"), frames_above, signal.quote))
    return sorted(found, key=lambda exception: exception.quote.line)


def _frames_above(frames: dict[int, Signal], at: Quote, process: str) -> tuple[Frame, ...]:
    chain: list[Frame] = []
    anchor = at.line
    while True:
        above = next(
            (
                frames[line]
                for line in range(anchor - 1, anchor - 1 - FRAME_GAP, -1)
                if line in frames
                and process_key(frames[line].quote.text, split_prefix(frames[line].quote.text)[1]) == process
            ),
            None,
        )
        if above is None:
            return tuple(reversed(chain))
        chain.append(Frame(above.get("file"), int(above.get("line")), above.get("func"), "", above.quote))
        anchor = above.quote.line
