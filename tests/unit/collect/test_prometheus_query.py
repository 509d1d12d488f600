"""How the Prometheus source chooses its window, step and label matcher, without a server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from diagnosers.collect.prometheus import job_matcher, job_window, round_step
from diagnosers.collect.target import Target

START = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("least_s", "step_s"),
    [(0.0, 1), (0.2, 1), (1.0, 1), (1.01, 2), (14.0, 15), (21.6, 30), (3600.0, 3600), (3601.0, 7200)],
)
def test_steps_are_round_and_never_finer_than_needed(least_s: float, step_s: int) -> None:
    assert round_step(least_s) == step_s


@pytest.mark.parametrize("hours", [0.01, 1, 6, 24, 24 * 30])
def test_no_series_exceeds_the_point_budget(hours: float) -> None:
    target = Target(job="j", backend="local", start=START, end=START + timedelta(hours=hours))
    window = job_window(target, max_points=1000)
    assert (window.start, window.end) == (target.start.timestamp(), target.end.timestamp())
    points = int((window.end - window.start) // window.step_s) + 1
    assert points <= 1000


def test_six_hours_is_read_at_thirty_seconds() -> None:
    target = Target(job="j", backend="local", start=START, end=START + timedelta(hours=6))
    assert job_window(target, max_points=1000).step_s == 30


def test_a_running_job_is_read_up_to_now_and_an_unknown_start_over_the_last_hour() -> None:
    now = START + timedelta(hours=3)
    running = job_window(Target(job="j", backend="local", start=START), 1000, now=now)
    assert (running.start, running.end) == (START.timestamp(), now.timestamp())
    unknown = job_window(Target(job="j", backend="local"), 1000, now=now)
    assert unknown.end - unknown.start == 3600


def test_kuberay_jobs_are_selected_by_pod_and_local_jobs_by_host() -> None:
    kuberay = Target(job="j", backend="kuberay", pod_regex="llm-ft-raycluster-x7k2p-.*")
    assert job_matcher(kuberay, "pod", "Hostname") == 'pod=~"llm-ft-raycluster-x7k2p-.*"'
    local = Target(job="j", backend="local", hosts=("gpu-box", "10.0.0.5"))
    assert job_matcher(local, "pod", "Hostname") == r'Hostname=~"gpu\\-box|10\\.0\\.0\\.5"'
    assert job_matcher(Target(job="j", backend="kuberay"), "pod", "Hostname") == ""


def test_a_hostile_host_name_stays_inside_its_string() -> None:
    local = Target(job="j", backend="local", hosts=('x"} or vector(1) or {a="',))
    matcher = job_matcher(local, "pod", "Hostname")
    label, _, value = matcher.partition("=~")
    assert label == "Hostname"
    # One PromQL string: it opens and closes once, and every quote inside is escaped.
    assert value.startswith('"') and value.endswith('"')
    assert '"' not in value[1:-1].replace('\\"', "")
