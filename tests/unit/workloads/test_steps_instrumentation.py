"""What workloads' StepTimer writes is what the engine reads."""

import itertools

from diagnosers.bundle import load_bundle
from diagnosers.engine import diagnose
from workloads.steps import StepTimer


def test_step_timer_output_is_read_back_as_step_phases(tmp_path):
    ticks = itertools.count()
    clock = lambda: next(ticks) * 0.01  # noqa: E731 - every reading advances 10 ms
    for rank in range(2):
        timer = StepTimer(tmp_path / "steps", rank, clock=clock, wall_clock=lambda: 1.7e9)
        for _ in range(20):
            with timer.step(samples=8):
                with timer.phase("data"):
                    pass
                with timer.phase("comm"):
                    pass
        timer.close()
    evidence = load_bundle(tmp_path)
    assert sorted(evidence.steps) == [0, 1]
    first = evidence.steps[0][0]
    assert (first.step, first.samples) == (0, 8.0)
    assert first.step_s > first.data_s > 0 and first.comm_s > 0
    assert evidence.sources["steps"] == "ok"
    assert diagnose(evidence).verdict in {"io-bound", "comm-bound", "compute-bound"}
