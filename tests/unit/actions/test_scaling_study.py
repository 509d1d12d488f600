"""The scaling study's driver: its plan (sizes, batch per worker or divided, steps past the warm-up, refusals), and
its run, point after point, over a scripted backend whose jobs write step files as the workload's StepTimer does
(the real local head runs a study in tests/integration/test_scale_study.py)."""

from dataclasses import dataclass, field

import pytest

from actions.errors import BadRequest
from actions.evidence.studying import point_to_explain
from actions.jobs.backends.rayjob import build_rayjob
from actions.jobs.job import STUDY_LABEL, Capacity, JobState, JobStatus, Launch
from actions.jobs.scaling import ScaleRequest, plan_study, run_study, total_steps
from actions.jobs.service import Jobs
from actions.jobs.studies import StudyStatus, StudyStore
from actions.settings import Settings
from tests.builders.job_records import open_store
from tests.builders.step_files import write_steps
from tests.standins.crd_schema import RAYJOB, problems, require_crd


def request(*sizes: int, words: tuple[str, ...] = ("batch_size=32",), **asked) -> ScaleRequest:
    return ScaleRequest(template="tiny-transformer", params=words, requester="alice", sizes=sizes, **asked)


def test_per_worker_batch_keeps_each_workers_batch_and_global_divides_it(tmp_path):
    settings = Settings(data_dir=tmp_path)
    weak = plan_study(settings, request(4, 1, 2))
    assert [(launch.workers, launch.params["batch_size"]) for launch in weak.launches] == [(1, 32), (2, 32), (4, 32)]
    strong = plan_study(settings, request(1, 2, 4, batch_mode="global"))
    assert [(launch.workers, launch.params["batch_size"]) for launch in strong.launches] == [(1, 32), (2, 16), (4, 8)]
    assert strong.params["batch_size"] == 32  # the study keeps the global batch it was asked for


def test_each_point_runs_its_measured_steps_after_a_tenth_of_warm_up_in_one_epoch(tmp_path):
    plan = plan_study(Settings(data_dir=tmp_path), request(1, 2, steps=45))
    point = plan.launches[0]
    assert point.params["steps_per_epoch"] == total_steps(45) == 50 and point.params["epochs"] == 1
    assert point.argv[point.argv.index("--steps_per_epoch") + 1] == "50"
    assert point.argv[-4:] == ["--num-workers", "1", "--gpus-per-worker", "0"]
    # The rules leave out int(50 * 0.1) = 5 steps: 45 are measured.
    assert total_steps(45) - int(total_steps(45) * 0.1) == 45
    assert all(total_steps(n) - int(total_steps(n) * 0.1) >= n for n in range(1, 500))


@pytest.mark.parametrize(
    ("asked", "says"),
    [
        (request(1, 3, batch_mode="global"), "batch_size=32 does not divide over 3 workers"),
        (request(2, 2), "give 2 to 8 sizes"),
        (request(1, 2, words=("batch_size=32", "steps_per_epoch=10")), "steps_per_epoch is set by --steps"),
        (request(1, 2, words=("epochs=3",)), "a study runs with epochs=1; drop epochs=3"),
        (request(1, 2, steps=0), "--steps 0: choose 1 to"),
        (request(1, 65), "--workers 65: template tiny-transformer allows 1 to 64"),
        (request(1, 2, words=("batch_size=4096",), batch_mode="per-worker", steps=200_000), "--steps 200000"),
    ],
)
def test_what_a_person_can_get_wrong_is_refused_before_anything_runs(tmp_path, asked, says):
    with pytest.raises(BadRequest, match=says):
        plan_study(Settings(data_dir=tmp_path), asked)


def test_a_template_without_study_parameters_cannot_be_studied(tmp_path):
    settings = Settings(data_dir=tmp_path, templates={"plain": {"entrypoint": ["python", "train.py"]}})
    with pytest.raises(BadRequest, match="template plain declares no `study`"):
        plan_study(settings, ScaleRequest(template="plain", params=(), requester="alice", sizes=(1, 2)))


@dataclass
class ScriptedBackend:
    """A backend whose jobs end in the state scripted for their size (PENDING: never) after answering RUNNING
    `running_polls` times, having written 20 steps a rank (data_dir/runs/<job>/steps, as the local backend's
    workloads do); with `cpus` and `gpus` it can hold that much at once (cpus None: it cannot say)."""

    settings: Settings
    ends: dict[int, JobState]
    comm_s: dict[int, float] = field(default_factory=dict)
    silent: set[int] = field(default_factory=set)  # sizes whose jobs write no step timings
    running_polls: int = 0
    cpus: float | None = None
    gpus: float = 0
    name: str = "local"
    launched: list[Launch] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    polls: dict[str, int] = field(default_factory=dict)
    launched_at_first_end: int | None = None  # how many jobs had been launched when the first one ended

    def submit(self, launch: Launch) -> JobStatus:
        self.launched.append(launch)
        if self.ends[launch.workers] != JobState.PENDING and launch.workers not in self.silent:
            write_steps(
                self.settings.data_dir / "runs" / launch.name,
                ranks=launch.workers,
                step_s=0.1 + self.comm_s.get(launch.workers, 0.0),
                comm_s=self.comm_s.get(launch.workers, 0.0),
                samples=int(launch.params["batch_size"]),
            )
        return JobStatus(launch.name, JobState.PENDING)

    def status(self, name: str) -> JobStatus:
        launch = next(launch for launch in self.launched if launch.name == name)
        if name in self.cancelled:
            return JobStatus(name, JobState.STOPPED, message="stopped")
        self.polls[name] = self.polls.get(name, 0) + 1
        if self.polls[name] <= self.running_polls:
            return JobStatus(name, JobState.RUNNING)
        state = self.ends[launch.workers]
        if state.terminal and self.launched_at_first_end is None:
            self.launched_at_first_end = len(self.launched)
        return JobStatus(name, state, message="worker died" if state == JobState.FAILED else "")

    def cancel(self, name: str, suspend: bool = False) -> JobStatus:
        self.cancelled.append(name)
        return self.status(name)

    def capacity(self) -> Capacity | None:
        return None if self.cpus is None else Capacity(self.cpus, self.gpus)


@pytest.fixture
def settings(tmp_path, state_store_url):
    return Settings(data_dir=tmp_path, state_store_url=state_store_url)


def study_run(settings: Settings, backend: ScriptedBackend, asked: ScaleRequest):
    store, studies = open_store(settings.state_url()), StudyStore(settings.state_url())
    seen: list[tuple[int, int, JobState]] = []
    jobs = Jobs(settings, store=store, backends={"local": backend})
    result = run_study(
        settings, jobs, studies, plan_study(settings, asked),
        watcher=lambda index, points, status: seen.append((index, points, status.state)), poll_s=0.01,
    )  # fmt: skip
    return result, studies.get(result.study.id), seen


def test_a_study_runs_each_size_in_turn_and_sets_them_in_a_table(settings):
    backend = ScriptedBackend(settings, dict.fromkeys((1, 2), JobState.SUCCEEDED), comm_s={2: 0.05})
    result, stored, seen = study_run(settings, backend, request(1, 2, batch_mode="global"))
    assert stored.status is StudyStatus.SUCCEEDED and stored.reason == ""
    assert stored.jobs == tuple(launch.name for launch in backend.launched)
    assert stored.sizes == (1, 2) and stored.batch_mode == "global"
    assert seen == [(0, 2, JobState.SUCCEEDED), (1, 2, JobState.SUCCEEDED)]
    one, two = result.table.rows
    assert one.samples_per_s == pytest.approx(320)
    assert two.samples_per_s == pytest.approx(16 / 0.15 + 16 / 0.151)  # half the batch a worker, slower steps
    assert two.efficiency is not None and two.efficiency < 0.8
    assert result.table.first_below == 2
    assert two.comm_share == pytest.approx(0.1 / 0.301)


def test_a_failing_point_ends_the_study_with_what_was_measured(settings):
    ends = {1: JobState.SUCCEEDED, 2: JobState.FAILED, 4: JobState.SUCCEEDED}
    backend = ScriptedBackend(settings, ends)
    result, stored, _ = study_run(settings, backend, request(1, 2, 4))
    assert [launch.workers for launch in backend.launched] == [1, 2]  # 4 never launched
    assert stored.status is StudyStatus.FAILED
    assert stored.reason == f"the 2-worker point ({stored.jobs[1]}) ended FAILED: worker died"
    assert [row.workers for row in result.table.rows] == [1, 2]
    assert all(row.measured for row in result.table.rows)  # the failed point's steps still count


def test_a_point_that_wrote_no_steps_ends_the_study(settings):
    backend = ScriptedBackend(settings, dict.fromkeys((1, 2, 4), JobState.SUCCEEDED), silent={2})
    result, stored, _ = study_run(settings, backend, request(1, 2, 4))
    assert [launch.workers for launch in backend.launched] == [1, 2]
    assert stored.reason == f"the 2-worker point ({stored.jobs[1]}) wrote no step timings to measure"
    assert [row.measured for row in result.table.rows] == [True, False]


def test_a_point_still_running_at_the_point_timeout_is_stopped_and_ends_the_study(settings):
    settings = settings.model_copy(update={"scale_point_timeout_s": 0.05})
    backend = ScriptedBackend(settings, {1: JobState.SUCCEEDED, 2: JobState.PENDING})
    result, stored, seen = study_run(settings, backend, request(1, 2))
    # The 2-worker point never started: it was stopped at the point timeout, and nothing was measured.
    assert backend.cancelled == [stored.jobs[1]]
    assert stored.status is StudyStatus.FAILED
    assert "ended STOPPED: ran past 0.05 s (TRAINBOT_SCALE_POINT_TIMEOUT_S)" in stored.reason
    assert seen[-2:] == [(1, 2, JobState.PENDING), (1, 2, JobState.STOPPED)]
    assert [row.measured for row in result.table.rows] == [True, False]


def test_in_parallel_every_point_is_launched_before_any_ends_and_each_is_measured(settings):
    ends = dict.fromkeys((1, 2, 4), JobState.SUCCEEDED)
    backend = ScriptedBackend(settings, ends, comm_s={2: 0.02, 4: 0.05}, running_polls=2, cpus=7)
    result, stored, seen = study_run(settings, backend, request(1, 2, 4, parallel=True))
    assert backend.launched_at_first_end == 3  # in turn, the first ends with only itself launched
    assert stored.status is StudyStatus.SUCCEEDED and stored.parallel is True
    assert stored.jobs == tuple(launch.name for launch in backend.launched)
    assert [row.workers for row in result.table.rows] == [1, 2, 4] and all(row.measured for row in result.table.rows)
    one, two, four = (row.comm_share for row in result.table.rows)  # each point measured from its own steps
    assert one == 0 and 0 < two < four
    # The watcher hears every point, each to its end, told the study's size.
    assert {(index, state) for index, points, state in seen if points == 3} == {
        (index, state) for index in range(3) for state in (JobState.RUNNING, JobState.SUCCEEDED)
    }


def test_in_turn_is_the_default_and_is_stored_so(settings):
    backend = ScriptedBackend(settings, dict.fromkeys((1, 2), JobState.SUCCEEDED), running_polls=2, cpus=1)
    _, stored, _ = study_run(settings, backend, request(1, 2))
    assert backend.launched_at_first_end == 1 and stored.parallel is False


@pytest.mark.parametrize(
    ("asked", "capacity", "says"),
    [
        (
            request(1, 2, 4, parallel=True),
            {"cpus": 6},
            "the 3 points need 7 CPUs and 0 GPUs at once, and local has 6 CPUs and 0 GPUs",
        ),
        (
            request(1, 2, gpus_per_worker=1, parallel=True),
            {"cpus": 64, "gpus": 2},
            "the 2 points need 3 CPUs and 3 GPUs at once, and local has 64 CPUs and 2 GPUs",
        ),
    ],
)
def test_parallel_is_refused_before_anything_runs_where_the_backend_cannot_hold_every_point(
    settings, asked, capacity, says
):
    backend = ScriptedBackend(settings, dict.fromkeys((1, 2, 4), JobState.SUCCEEDED), **capacity)
    with pytest.raises(BadRequest, match=f"^--parallel: {says}; drop --parallel or give fewer sizes$"):
        study_run(settings, backend, asked)
    assert backend.launched == []


def test_parallel_goes_on_where_the_backend_cannot_say_what_it_holds(settings):
    backend = ScriptedBackend(settings, dict.fromkeys((1, 2, 4), JobState.SUCCEEDED), running_polls=1, cpus=None)
    _, stored, _ = study_run(settings, backend, request(1, 2, 4, parallel=True))
    assert stored.status is StudyStatus.SUCCEEDED and backend.launched_at_first_end == 3


def test_a_point_that_fails_in_parallel_stops_the_others_and_the_study_fails_with_what_was_measured(settings):
    settings = settings.model_copy(update={"scale_point_timeout_s": 2.0})  # in turn, the 1-worker point times out
    ends = {1: JobState.SUCCEEDED, 2: JobState.FAILED, 4: JobState.PENDING}  # 4 workers never start
    backend = ScriptedBackend(settings, ends, running_polls=1, cpus=None)
    backend.ends[1] = JobState.RUNNING  # still running when the 2-worker point fails
    result, stored, _ = study_run(settings, backend, request(1, 2, 4, parallel=True))
    assert len(backend.launched) == 3
    assert backend.cancelled == [stored.jobs[0], stored.jobs[2]]  # the two still going, each asked once
    assert max(backend.polls.values()) <= 3  # stopped once the failure was seen, not left to the point timeout
    assert stored.status is StudyStatus.FAILED and result.ended_at == 1
    assert stored.reason == f"the 2-worker point ({stored.jobs[1]}) ended FAILED: worker died"
    # Every launched size has its row: the stopped 1-worker point measured with the steps it wrote, the
    # 4-worker one (never started) not measured.
    assert [(row.workers, row.measured) for row in result.table.rows] == [(1, True), (2, True), (4, False)]
    assert point_to_explain(result) == (1, "it ended the study")


def test_a_configured_study_must_name_the_templates_own_parameters(tmp_path):
    body = {"entrypoint": ["python", "train.py"], "params": {"bs": {"type": "int", "default": 8}}}
    settings = Settings(data_dir=tmp_path, templates={"mine": {**body, "study": {"batch": "bs", "steps": "iters"}}})
    with pytest.raises(BadRequest, match="study names parameters the template does not declare: iters"):
        plan_study(settings, ScaleRequest(template="mine", params=(), requester="alice", sizes=(1, 2)))


def test_the_point_diagnosed_is_the_one_that_ended_the_study_else_the_first_under_the_threshold(settings):
    failed, _, _ = study_run(settings, ScriptedBackend(settings, {1: JobState.SUCCEEDED, 2: JobState.FAILED}),
                             request(1, 2, 4))  # fmt: skip
    assert point_to_explain(failed) == (1, "it ended the study")
    bent, _, _ = study_run(settings, ScriptedBackend(settings, dict.fromkeys((1, 2), JobState.SUCCEEDED),
                           comm_s={2: 0.05}), request(1, 2, batch_mode="global"))  # fmt: skip
    assert point_to_explain(bent) == (1, f"its efficiency {bent.table.rows[1].efficiency:.2f} is under 0.8")
    kept_up, _, _ = study_run(settings, ScriptedBackend(settings, dict.fromkeys((1, 2), JobState.SUCCEEDED)),
                              request(1, 2))  # fmt: skip
    assert kept_up.table.first_below is None and point_to_explain(kept_up) is None


def test_a_studys_rayjobs_are_one_a_size_labelled_with_the_study_and_valid_for_kuberay(tmp_path):
    crd = require_crd(RAYJOB)
    plan = plan_study(Settings(data_dir=tmp_path), request(1, 2, 4, gpus_per_worker=1, backend="kuberay"))
    rayjobs = [build_rayjob(launch, Settings(data_dir=tmp_path)) for launch in plan.launches]
    assert [rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] for rayjob in rayjobs] == [1, 2, 4]
    assert len({rayjob["metadata"]["name"] for rayjob in rayjobs}) == 3
    for rayjob in rayjobs:
        assert rayjob["metadata"]["labels"][STUDY_LABEL] == plan.id
        assert [str(problem) for problem in problems(crd, rayjob)] == []
