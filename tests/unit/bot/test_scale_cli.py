"""`trainbot scale`'s refusals: what a person can get wrong is one line saying what to do, before anything runs."""

import os
import subprocess

import pytest

from tests.paths import TRAINBOT


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["--workers", "1"], "trainbot: --workers 1: give 2 to 8 sizes, e.g. --workers 1,2,4"),
        (["--workers", "1,x"], "give worker counts separated by commas, e.g. 1,2,4"),
        (["--workers", "1,3", "--batch", "global"], "batch_size=32 does not divide over 3 workers"),
        (["--workers", "1,2", "steps_per_epoch=5"], "steps_per_epoch is set by --steps in a study"),
        (["--workers", "1,2", "--chart", "/nowhere/at/all.png"], "--chart /nowhere/at/all.png: give a file name"),
    ],
)
def test_a_mistake_is_one_line_and_nothing_is_launched(tmp_path, words, says):
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TRAINBOT_")}
    result = subprocess.run(
        [str(TRAINBOT), "scale", "tiny-transformer", *words], capture_output=True, text=True, timeout=120,
        env={**clean, "TRAINBOT_DATA_DIR": str(tmp_path / "data")}, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert says in result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data" / "runs").exists()
