"""Generic failure lines: a fatal log line, or a process that recorded a non-zero exit.

These say that something failed without saying why; the unrecognised rule quotes them when no
other rule knows the cause. `non-fatal` and `not fatal` are not fatal lines. `Fatal Python error` and
`exit code 139` are left to kernel.PROCESS_CRASH, which shares their first word: the scanner's regex
fallback reports one needle where two start at the same place.
"""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

FATAL_LINE = "failure.fatal-line"
NONZERO_EXIT = "failure.nonzero-exit"

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
        ["exit code", "exit status", "exited with code", "exitcode", "Exit code"],
        r"(?i:exit(?:ed with)? ?(?:code|status)|exitcode)\s*[:=]?\s*(?P<code>-?(?!139\b)[1-9]\d*)\b",
        [
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: exitcode  : 1 (pid: 4711)",
            "  exitcode  : 1 (pid: 4711)",
            "Job 'raysubmit_Q2' exited with code 1",
            "subprocess.CalledProcessError: Command '['python', 'prep.py']' returned non-zero exit status 2.",
        ],
    ),
)
