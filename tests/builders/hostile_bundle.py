"""A bundle whose logs are hostile to Slack: text meant to ping the channel and break out of a code span."""

from pathlib import Path

HOSTILE = "<!channel> `rm -rf /` & <@U02B>"


def hostile_bundle(root: Path) -> Path:
    """Five ranks OOM, each log line starting with text meant to ping the channel and break out of code."""
    (root / "logs").mkdir(parents=True)
    for rank in range(5):
        (root / "logs" / f"worker-{rank}.log").write_text(
            f"{HOSTILE} rank {rank} {'x' * 900} torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB.\n"
        )
    return root
