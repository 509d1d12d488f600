"""Bad input never stops a diagnosis: it becomes a note in `sources` and the rest is read."""

import io
import json
import tarfile
from pathlib import Path

import pytest

from diagnosers import bundle as bundle_module
from diagnosers.bundle import MAX_FILE_NOTES, NotABundle, load_bundle
from diagnosers.engine import diagnose
from diagnosers.findings import NCCL_NETWORK_ERROR, NCCL_TIMEOUT
from diagnosers.limits import MIB, Limits
from diagnosers.parsers import logs as logs_module
from diagnosers.parsers.json_sources import QUOTE_WINDOW

TIMEOUT_LINE = (
    "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 milliseconds before timing out."
)


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    root = tmp_path / "bundle"
    write(root / "logs" / "rank-1.log", f"step 1\nstep 2\n{TIMEOUT_LINE}\n")
    return root


def ids(root: Path) -> set[str]:
    return {found.id for found in diagnose(load_bundle(root)).findings}


def test_a_plain_bundle_is_diagnosed(bundle):
    diagnosis = diagnose(load_bundle(bundle))
    assert diagnosis.findings[0].id == NCCL_TIMEOUT
    quote = diagnosis.findings[0].evidence[0]
    assert (quote.source, quote.line, quote.text) == ("logs/rank-1.log", 3, TIMEOUT_LINE)
    assert diagnosis.sources["logs"] == "ok"
    assert diagnosis.sources["prometheus"] == "missing"


@pytest.mark.parametrize(
    ("relative", "content", "note"),
    [
        ("k8s/events.json", "{not json", "not JSON"),
        ("k8s/pods.json", b"", "empty file"),
        ("logs/core.dump", bytes(range(256)) * 64, "binary content"),
        ("logs/zeros.log", b"\x00" * 10000, "binary content"),
        (
            "prometheus/DCGM_FI_DEV_GPU_UTIL.json",
            '{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}',
            "unsupported Prometheus resultType 'scalar'",
        ),
        (
            "prometheus/DCGM_FI_DEV_GPU_UTIL.json",
            '{"status":"success","data":{"resultType":"surprise","result":[]}}',
            "unsupported Prometheus resultType 'surprise'",
        ),
        ("prometheus/up.json", '{"status":"error","errorType":"bad_data","error":"parse error"}', "parse error"),
        ("ray/jobs.json", "[" * 100000, "nested too deeply"),
        ("bundle.json", "[1, 2]", "expected a JSON object"),
        ("steps/rank-0.jsonl", '{"rank": 0}\nnot json\n', "2 line(s) are not step records"),
        ("k8s/notes.txt", "hello", "not part of the bundle layout"),
        ("ray/tasks.json", '{"result": true, "data": {}}', "expected the state API's"),
        ("ray/nodes.json", '{"result": false, "msg": "boom"}', "expected the dashboard's"),
    ],
)
def test_a_malformed_file_is_a_note_and_the_rest_is_still_diagnosed(bundle, relative, content, note):
    write(bundle / relative, content)
    diagnosis = diagnose(load_bundle(bundle))
    assert note in diagnosis.sources[relative]
    assert diagnosis.sources[relative].startswith("error: ")
    assert NCCL_TIMEOUT in {found.id for found in diagnosis.findings}


def test_a_prometheus_vector_is_read_as_one_sample_per_series(bundle):
    document = {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {"gpu": "0"}, "value": [1, "42"]}]},
    }
    write(bundle / "prometheus" / "DCGM_FI_DEV_GPU_UTIL.json", json.dumps(document))
    [series] = load_bundle(bundle).series["DCGM_FI_DEV_GPU_UTIL"]
    assert (list(series.times), series.values) == ([1.0], [42.0])


def test_nan_and_garbage_samples_are_dropped_not_fatal(bundle):
    values = [[1, "NaN"], [2, "+Inf"], [3, "12.5"], [4, None], ["x"]]
    document = {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": values}]}}
    write(bundle / "prometheus" / "DCGM_FI_DEV_GPU_UTIL.json", json.dumps(document))
    [series] = load_bundle(bundle).series["DCGM_FI_DEV_GPU_UTIL"]
    assert (list(series.times), series.values) == ([3.0], [12.5])  # each value keeps its own time


def test_many_tiny_files_are_read_and_notes_are_capped(bundle):
    for index in range(2000):
        write(bundle / "logs" / f"tiny-{index:05}.log", f"line {index}\n")
    for index in range(MAX_FILE_NOTES + 5):
        write(bundle / "k8s" / f"extra-{index}.json", "{}")
    diagnosis = diagnose(load_bundle(bundle))
    assert NCCL_TIMEOUT in {found.id for found in diagnosis.findings}
    notes = [key for key in diagnosis.sources if key.startswith("k8s/extra-")]
    assert len(notes) == MAX_FILE_NOTES
    assert diagnosis.sources["more-files"] == "error: 5 more file(s) could not be read"


def test_a_tar_gz_bundle_with_a_top_folder_reads_like_the_folder(bundle, tmp_path):
    archive = tmp_path / "bundle.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(bundle, arcname="job-1234")
    assert ids(bundle) == {found.id for found in diagnose(load_bundle(archive)).findings}
    assert diagnose(load_bundle(archive)).findings[0].evidence[0].source == "logs/rank-1.log"


def test_an_archive_never_writes_to_disk_even_with_hostile_member_names(tmp_path, monkeypatch):
    # Read from a folder of its own, two levels down, so "../../" would land inside tmp_path: other tests'
    # files elsewhere in the temp root come and go (sqlite's -wal files) and are not this test's business.
    here = tmp_path / "work" / "here"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    archive = tmp_path / "evil.tar.gz"
    payload = TIMEOUT_LINE.encode()
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("../../escaped.log", "/abs/logs/a.log", "logs/../../b.log"):
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
        write(tmp_path / "logs" / "x.log", TIMEOUT_LINE)
        tar.add(tmp_path / "logs" / "x.log", arcname="logs/x.log")
    before = set(tmp_path.rglob("*"))
    assert NCCL_TIMEOUT in ids(archive)
    assert set(tmp_path.rglob("*")) == before
    assert not Path("/abs/logs/a.log").exists()


def test_symlinks_out_of_the_bundle_are_not_followed(bundle, tmp_path):
    secret = write(tmp_path / "outside.log", TIMEOUT_LINE.replace("rank1", "rank9"))
    (bundle / "logs" / "link.log").symlink_to(secret)
    sources = {quote.source for found in diagnose(load_bundle(bundle)).findings for quote in found.evidence}
    assert "logs/link.log" not in sources


@pytest.mark.parametrize("make", ["missing", "empty-dir", "plain-file", "unrelated-dir", "truncated-tar"])
def test_not_a_bundle_says_why(tmp_path, make):
    target = tmp_path / "target"
    if make == "empty-dir":
        target.mkdir()
    elif make == "plain-file":
        write(target, "just text")
    elif make == "unrelated-dir":
        write(target / "README.md", "hello")
    elif make == "truncated-tar":
        archive = tmp_path / "ok.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(write(tmp_path / "README.md", "hello\n" * 1000), arcname="README.md")
        target.write_bytes(archive.read_bytes()[:60])
    with pytest.raises(NotABundle) as raised:
        load_bundle(target)
    assert str(target) in str(raised.value)
    assert "\n" not in str(raised.value)


def test_an_archive_cut_short_keeps_what_came_before(tmp_path):
    source = tmp_path / "src"
    write(source / "logs" / "a.log", TIMEOUT_LINE + "\n")
    write(source / "logs" / "b.log", "".join(f"{index:08x} random-ish filler\n" for index in range(200000)))
    archive = tmp_path / "full.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source / "logs" / "a.log", arcname="logs/a.log")
        tar.add(source / "logs" / "b.log", arcname="logs/b.log")
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    diagnosis = diagnose(load_bundle(cut))
    assert NCCL_TIMEOUT in {found.id for found in diagnosis.findings}
    assert "cut short" in diagnosis.sources["cut.tar.gz"]


def test_a_log_cut_short_inside_an_archive_keeps_the_lines_read_before_the_cut(tmp_path):
    filler = "".join(f"step {index:09d} loss {index * 7919 % 100003:06d}\n" for index in range(700_000))
    log = write(tmp_path / "src" / "rank-1.log", TIMEOUT_LINE + "\n" + filler)
    archive = tmp_path / "full.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(log, arcname="logs/rank-1.log")
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size * 3 // 4])
    diagnosis = diagnose(load_bundle(cut))
    assert diagnosis.findings[0].id == NCCL_TIMEOUT
    assert diagnosis.findings[0].evidence[0].line == 1
    assert "cut short" in diagnosis.sources["cut.tar.gz"]


# Ray 2.60's answers, trimmed: the state API's task list with one task killed by the memory monitor, and
# the dashboard's node summary.
OOM_TASK_MESSAGE = (
    "1 worker(s) were killed due to the node running low on memory. Memory on the node (IP: 192.0.2.2, "
    "ID: 36c1c359) was 9.48GB used / 23.54GB limit (0.402640)\nOOM kill reason: Memory usage 10143776768B "
    "exceeded threshold of 10110604288B (40.0% of 25276510208B limit)"
)
TASKS = {
    "result": True,
    "msg": "",
    "data": {
        "result": {
            "total": 2,
            "result": [
                {"name": "hog", "state": "FAILED", "error_type": "OUT_OF_MEMORY", "error_message": OOM_TASK_MESSAGE},
                {"name": "square", "state": "FINISHED", "error_type": None, "error_message": None},
            ],
        }
    },
}
NODES = {"result": True, "msg": "Node summary fetched.", "data": {"summary": [{"hostname": "vm", "ip": "192.0.2.2"}]}}


@pytest.mark.parametrize("document", [TASKS, TASKS["data"]["result"]["result"]], ids=["state-api", "ray-list"])
def test_a_task_killed_for_memory_in_the_task_list_is_host_oom(tmp_path, document):
    root = tmp_path / "bundle"
    write(root / "ray" / "tasks.json", json.dumps(document))
    write(root / "ray" / "nodes.json", json.dumps(NODES))
    diagnosis = diagnose(load_bundle(root))
    assert diagnosis.sources["ray"] == "ok"
    assert not [name for name in diagnosis.sources if name.startswith("ray/")], diagnosis.sources
    (host_oom,) = [found for found in diagnosis.findings if found.id == "host-oom"]
    assert {quote.source for quote in host_oom.evidence} == {"ray/tasks.json"}


def tar_of(archive: Path, members: dict[str, bytes], mode: str = "w:gz") -> Path:
    with tarfile.open(archive, mode) as tar:
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return archive


def test_an_archive_file_past_the_limit_is_cut_and_noted_and_what_came_before_is_read(tmp_path):
    log = (TIMEOUT_LINE + "\n").encode() + b"step 1 loss 0.5\n" * (3 * MIB // 16)
    archive = tar_of(tmp_path / "b.tar.bz2", {"logs/rank-1.log": log, "logs/rank-2.log": b"ok\n"}, "w:bz2")
    diagnosis = diagnose(load_bundle(archive, limits=Limits(file_bytes=MIB)))
    assert diagnosis.findings[0].id == NCCL_TIMEOUT
    assert "cut at 1 MB, the limit for one file of an archive" in diagnosis.sources["logs/rank-1.log"]
    assert "logs/rank-2.log" not in diagnosis.sources


def test_a_spent_budget_stops_the_archive_with_a_note(tmp_path):
    log = b"step 1 loss 0.5\n" * (3 * MIB // 16)
    archive = tar_of(tmp_path / "b.tar.xz", {"logs/a.log": log, "logs/b.log": TIMEOUT_LINE.encode()}, "w:xz")
    sources = load_bundle(archive, limits=Limits(total_bytes=MIB)).sources
    assert "stopped after 1 MB decompressed, the limit for a bundle" in sources["b.tar.xz"]
    assert "nothing after logs/a.log was read" in sources["b.tar.xz"]
    assert "logs/b.log" not in sources


def test_links_devices_and_names_outside_the_bundle_are_refused_with_a_note(tmp_path):
    archive = tmp_path / "links.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, kind in (("logs/link.log", tarfile.SYMTYPE), ("logs/hard.log", tarfile.LNKTYPE)):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, "/etc/passwd"
            tar.addfile(info)
        device = tarfile.TarInfo("logs/dev.log")
        device.type = tarfile.CHRTYPE
        tar.addfile(device)
        for name in ("logs/../../up.log", "logs/x.log"):
            info = tarfile.TarInfo(name)
            info.size = len(TIMEOUT_LINE)
            tar.addfile(info, io.BytesIO(TIMEOUT_LINE.encode()))
    diagnosis = diagnose(load_bundle(archive))
    assert "a link, not a file" in diagnosis.sources["logs/link.log"]
    assert "a link, not a file" in diagnosis.sources["logs/hard.log"]
    assert "not a regular file" in diagnosis.sources["logs/dev.log"]
    assert "leads outside the bundle" in diagnosis.sources["logs/../../up.log"]
    assert {quote.source for quote in diagnosis.findings[0].evidence} == {"logs/x.log"}


def test_steps_stream_past_a_huge_line_and_stop_at_the_record_limit(bundle, monkeypatch):
    monkeypatch.setattr(bundle_module, "MAX_STEPS_PER_FILE", 3)
    record = b'{"rank": 0, "step": %d, "step_s": 0.5, "data_s": "0.1", "comm_s": null}\n'
    huge = b'{"rank": 0, "note": "' + b"x" * (1 << 20) + b'"}\n'
    write(bundle / "steps" / "rank-0.jsonl", record % 1 + huge + b"".join(record % step for step in range(2, 9)))
    evidence = load_bundle(bundle)
    assert [record.step for record in evidence.steps[0]] == [1, 2, 3]
    assert evidence.steps[0][1].quote.line == 3
    note = evidence.sources["steps/rank-0.jsonl"]
    assert "1 line(s) are not step records" in note
    assert "stopped at line 5: kept 3 step records, the limit" in note


def test_a_json_file_that_would_take_too_much_memory_is_refused_before_it_is_parsed(bundle):
    write(bundle / "k8s" / "pods.json", b'{"items": [' + b"{}," * 1_500_000 + b"{}]}")
    note = diagnose(load_bundle(bundle)).sources["k8s/pods.json"]
    assert "JSON values would take about" in note
    assert "over the 256 MB limit for a JSON file" in note


def test_a_log_with_too_many_matching_lines_stops_with_a_note(bundle, monkeypatch):
    monkeypatch.setattr(bundle_module, "MAX_HITS_PER_LOG", 10)
    # Distinct lines: repeats of one line are passed over and not counted (the next test).
    lines = [f"h:1:2 [0] NCCL WARN NET/Socket : Connection closed by peer 10.0.0.{peer}\n" for peer in range(50)]
    write(bundle / "logs" / "warn.log", "".join(lines))
    diagnosis = diagnose(load_bundle(bundle))
    assert "stopped at line 11: 10 lines matched" in diagnosis.sources["logs/warn.log"]
    assert NCCL_TIMEOUT in {found.id for found in diagnosis.findings}


def test_repeats_of_one_line_do_not_use_up_the_matched_lines_limit(bundle, monkeypatch):
    monkeypatch.setattr(bundle_module, "MAX_HITS_PER_LOG", 10)
    repeated = "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0\n" * 50_000
    write(bundle / "logs" / "socket.log", repeated + "h:1:2 [0] NCCL WARN NET/Socket : Connection closed by peer\n")
    diagnosis = diagnose(load_bundle(bundle))
    assert "logs/socket.log" not in diagnosis.sources
    (network,) = [found for found in diagnosis.findings if found.id == NCCL_NETWORK_ERROR]
    assert [quote.line for quote in network.evidence if quote.source == "logs/socket.log"] == [50_001]


def test_minified_json_is_quoted_as_a_window_not_the_whole_file(tmp_path):
    filler = [{"name": "square", "state": "FINISHED", "pad": "x" * 100} for _ in range(20_000)]
    killed = TASKS["data"]["result"]["result"][0]
    write(tmp_path / "ray" / "tasks.json", json.dumps([*filler, killed, *filler], separators=(",", ":")))
    (host_oom,) = [found for found in diagnose(load_bundle(tmp_path)).findings if found.id == "host-oom"]
    assert host_oom.evidence
    assert all(len(quote.text) <= 2 * QUOTE_WINDOW + 500 for quote in host_oom.evidence)


def test_passing_over_repeated_lines_changes_no_finding_nor_quote(bundle, monkeypatch):
    lines = []
    for reinit in range(300):
        lines.append(f"h{reinit % 3}:5:6 [0] NCCL INFO comm 0x{reinit:x} rank 0 nranks 2 - Init COMPLETE")
        lines += [f"h1:5:6 [0] NCCL INFO Channel {ch:02d}/0 : 0[0] -> 1[1] via NET/Socket/0" for ch in range(4)]
        lines += ["h1:5:6 [0] NCCL INFO Using network Socket", "h1:5:6 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"]
    write(bundle / "logs" / "rank-0.log", "\n".join(lines) + "\n")
    write(bundle / "logs" / "rank-1.log", "\n".join(reversed(lines)) + "\n")
    passed_over = diagnose(load_bundle(bundle)).to_dict()
    monkeypatch.setattr(logs_module, "REPEATS_KEPT", 10**9)
    assert diagnose(load_bundle(bundle)).to_dict() == passed_over


def test_repeats_kept_for_quotes_do_not_use_up_the_matched_lines_limit(bundle, monkeypatch):
    monkeypatch.setattr(bundle_module, "MAX_HITS_PER_LOG", 10)
    lines = [f"h:1:2 [0] NCCL INFO Channel {ch:02d}/0 : 0[0] -> 1[1] via NET/Socket/0" for ch in range(6)] * 4
    write(bundle / "logs" / "socket.log", "\n".join(lines) + "\n")
    diagnosis = diagnose(load_bundle(bundle))
    assert "logs/socket.log" not in diagnosis.sources
