"""A folder bundle's logs and metrics read by two processes give exactly what one process gives, and a failing
second process becomes a note, never a hang or a traceback."""

import os
import pickle
import shutil
import signal
import time
from pathlib import Path

import pytest

from diagnosers import bundle as bundle_module
from diagnosers import forked
from diagnosers.bundle import load_bundle
from diagnosers.engine import diagnose
from diagnosers.limits import Budget, CountedReader, Limits
from diagnosers.parsers.logs import LogParser

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (Linux, macOS)")


@pytest.fixture(autouse=True)
def forks_anyway(monkeypatch: pytest.MonkeyPatch) -> None:
    """However busy the machine, and whatever idle threads earlier tests of the suite left (a Ray client's), the
    second process is started: the forked reader only reads files and writes its spool, so it takes no lock those
    threads could hold. A trainbot command has one thread when it decides (see forked.can_fork)."""
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    monkeypatch.setattr(forked, "an_idle_core", lambda: True)


# Enough logs for both processes to take a share, few enough that the main one stays within the 2 s time limits.
MANY_LOGS = 500


@pytest.fixture
def many_files(tmp_path: Path) -> Path:
    """Corpus cases' logs in one bundle, beside an example's metrics: tracebacks, timeouts, NCCL chatter. A fixed
    number of them, so the time-limit tests keep their timing as the corpus grows."""
    bundle = tmp_path / "bundle"
    (bundle / "logs").mkdir(parents=True)
    for log in sorted(ROOT.glob("tests/corpus/*/bundle/logs/*"))[:MANY_LOGS]:
        shutil.copy(log, bundle / "logs" / f"{log.parents[2].name}--{log.name}")
    (bundle / "prometheus").mkdir()
    for metrics in sorted(ROOT.glob("examples/bundles/*/prometheus/*.json")):
        shutil.copy(metrics, bundle / "prometheus" / f"{metrics.parents[1].name}--{metrics.name}")
    return bundle


def read_alone(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    with monkeypatch.context() as alone:
        alone.setattr(bundle_module, "READ_BESIDE_MIN_BYTES", 1 << 62)
        return diagnose(load_bundle(bundle)).to_dict()


def read_beside(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    shared_by = []
    share = forked.share

    def spied_share(jobs, work, timeout_s):
        shared_by.append(os.getpid())
        return share(jobs, work, timeout_s)

    monkeypatch.setattr(bundle_module, "READ_BESIDE_MIN_BYTES", 0)
    monkeypatch.setattr(forked, "share", spied_share)
    diagnosis = diagnose(load_bundle(bundle)).to_dict()
    assert shared_by == [os.getpid()]
    return diagnosis


def test_two_processes_give_the_same_diagnosis_as_one(many_files, monkeypatch):
    alone = read_alone(many_files, monkeypatch)
    assert alone["findings"]
    assert read_beside(many_files, monkeypatch) == alone


def test_the_same_evidence_in_the_same_order(many_files, monkeypatch):
    monkeypatch.setattr(bundle_module, "READ_BESIDE_MIN_BYTES", 1 << 62)
    alone = load_bundle(many_files)
    monkeypatch.setattr(bundle_module, "READ_BESIDE_MIN_BYTES", 0)
    beside = load_bundle(many_files)
    assert beside.exceptions == alone.exceptions
    assert beside.signals == alone.signals
    assert beside.series == alone.series


def test_the_matched_lines_limit_cuts_where_one_process_cuts(many_files, monkeypatch):
    monkeypatch.setattr(bundle_module, "MAX_HITS_PER_BUNDLE", 40)
    alone = read_alone(many_files, monkeypatch)
    assert any("matching lines, the limit" in note for note in alone["sources"].values())
    assert read_beside(many_files, monkeypatch) == alone


def test_the_samples_limit_cuts_where_one_process_cuts(many_files, monkeypatch):
    # First in bundle order but read last (the smallest): the process reading it has used up its own limit.
    smallest = min((many_files / "prometheus").iterdir(), key=lambda path: path.stat().st_size)
    shutil.copy(smallest, many_files / "prometheus" / "0-first.json")
    monkeypatch.setattr(bundle_module, "MAX_SAMPLES_PER_BUNDLE", 10)
    alone = read_alone(many_files, monkeypatch)
    assert "prometheus/0-first.json" not in alone["sources"]
    assert "samples, the limit" in alone["sources"]["prometheus/comm-bound-small-batch--DCGM_FI_DEV_GPU_UTIL.json"]
    assert read_beside(many_files, monkeypatch) == alone


def fail_in_the_forked_process(monkeypatch: pytest.MonkeyPatch, how) -> None:
    parent = os.getpid()
    read_one = bundle_module._read_one

    def read_or_fail(entry, parser, budget, tally):
        if os.getpid() != parent and entry[0].endswith(".log"):
            how()
        # Slow enough here that the forked process surely takes some logs.
        time.sleep(0.002)
        return read_one(entry, parser, budget, tally)

    monkeypatch.setattr(bundle_module, "_read_one", read_or_fail)
    monkeypatch.setattr(bundle_module, "READ_BESIDE_MIN_BYTES", 0)


@pytest.mark.parametrize(
    ("how", "why"),
    [
        (lambda: os.kill(os.getpid(), signal.SIGKILL), "it was killed by SIGKILL"),
        (lambda: 1 / 0, "it failed with exit status 70"),
    ],
    ids=["killed", "raised"],
)
def test_a_second_process_that_dies_leaves_a_note_and_the_rest_is_read(many_files, monkeypatch, how, why):
    fail_in_the_forked_process(monkeypatch, how)
    diagnosis = diagnose(load_bundle(many_files)).to_dict()
    lost = {name: note for name, note in diagnosis["sources"].items() if "beside the main one failed" in note}
    assert len(lost) == 1
    assert next(iter(lost.values())) == f"error: the process reading it beside the main one failed ({why}); not read"
    assert diagnosis["findings"]


def test_a_second_process_that_hangs_is_stopped_after_the_time_limit(many_files, monkeypatch):
    fail_in_the_forked_process(monkeypatch, lambda: time.sleep(3600))
    monkeypatch.setattr(bundle_module, "READ_BESIDE_GRACE_S", 0.5)
    began = time.monotonic()
    diagnosis = diagnose(load_bundle(many_files, limits=Limits(seconds=2.0))).to_dict()
    assert time.monotonic() - began < 10
    lost = [note for note in diagnosis["sources"].values() if "beside the main one failed" in note]
    assert lost == ["error: the process reading it beside the main one failed (it did not finish within 2.5 s "
                    "and was stopped); not read"]  # fmt: skip


def test_share_gives_every_result_whichever_process_ran_it():
    shared = forked.share(list(range(100)), lambda number: (number * number, os.getpid()), timeout_s=30)
    assert sorted(shared.results) == list(range(100)) and not shared.lost
    assert all(square == number * number for number, (square, _) in shared.results.items())


@pytest.mark.parametrize("top", ["logs", "prometheus"])
def test_a_file_read_crosses_between_processes_whole(many_files, top):
    path = max((many_files / top).iterdir(), key=lambda path: path.stat().st_size)
    budget = Budget(Limits())
    entry = (f"{top}/{path.name}", path.stat().st_size, lambda: CountedReader(path.open("rb"), budget), path)
    read = bundle_module._read_one(entry, LogParser(), budget, bundle_module._Tally())
    assert read.evidence.series or read.evidence.signals
    assert pickle.loads(pickle.dumps(read)) == read


def test_a_process_keeps_no_more_than_the_bundle_wide_limits_of_what_it_reads(many_files):
    log = max((many_files / "logs").iterdir(), key=lambda path: path.stat().st_size)
    budget = Budget(Limits())
    entry = (f"logs/{log.name}", log.stat().st_size, lambda: CountedReader(log.open("rb"), budget), log)
    spent = bundle_module._Tally(hits=bundle_module.MAX_HITS_PER_BUNDLE)
    read = bundle_module._read_one(entry, LogParser(), budget, spent)
    assert read.hits == 0 and "not scanned" in read.notes[0][1]


def test_where_no_process_can_be_forked_this_one_does_every_job(monkeypatch):
    def no_fork():
        raise BlockingIOError("Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    shared = forked.share(list(range(10)), lambda number: number + 1, timeout_s=5)
    assert shared.results == {number: number + 1 for number in range(10)} and not shared.lost


def test_an_idle_core_is_one_no_other_task_is_running_on(monkeypatch, tmp_path):
    monkeypatch.undo()
    monkeypatch.setattr(forked, "_cores", lambda: 2)
    loadavg = tmp_path / "loadavg"
    monkeypatch.setattr(forked, "Path", lambda _: loadavg)
    loadavg.write_text("0.50 0.40 0.30 1/250 4242\n")
    assert forked.an_idle_core()
    loadavg.write_text("2.50 2.40 2.30 3/250 4242\n")
    assert not forked.an_idle_core()
