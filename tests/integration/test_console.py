"""`trainbot console` driven by scripts, piped lines and a terminal: the exit test on the session's real Ray head
and MLflow store; the reject modal, one name per person across the CLI and the console, library logs kept off the
terminal and the prompt drawn again after the bot speaks, against a real sqlite registry and no Ray head."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from mlflow import MlflowClient
from PIL import Image

from actions.promotions.deliveries import Delivery
from actions.promotions.service import Promotions
from actions.settings import Settings
from bot.console.terminal import run_console
from bot.render.charts import DPI, PANEL_HEIGHT_IN, WIDTH_IN
from tests.builders.model_registry import register
from tests.integration.cli import trainbot
from tests.paths import TRAINBOT
from tests.servers.processes import free_port

pytestmark = pytest.mark.integration
PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "console"
# A terminal's control sequences (cursor moves, colours, erasing), which prompt_toolkit writes around its prompt.
ANSI_CONTROL = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07|[()][A-Z0-9]|[=>])|\r")

EXIT_TEST = """\
# sweep and watch its progress, promote the best to staging, approve as another user, diagnose
/train sweep tiny-transformer --trials 2 lr=loguniform(1e-3,1e-2) epochs=1 steps_per_epoch=5 batch_size=16 d_model=32
wait "trials finished" 280
click "Promote best to staging"
as bob
click Approve
wait "alias moved" 30
click Diagnose
wait "Diagnosis of" 120
wait "📎 Runbook: Step time dominated by computation" 60
"""


def test_the_exit_test_runs_in_the_console_as_written(ray_env, tmp_path):
    script = tmp_path / "exit-test.txt"
    script.write_text(EXIT_TEST)
    result = trainbot(ray_env, "console", "--as", "alice", "--script", str(script), check=False)
    shown = result.stdout
    assert result.returncode == 0, shown + result.stderr
    sweep = re.search(r"#1 trainbot in C0CONSOLE: ⏳ `(tiny-transformer-sweep-[a-z0-9]+)`  \*PENDING\*", shown)
    assert sweep, shown
    job = sweep[1]
    assert "    ↳ #2 in the thread of #1: Waiting for the first trial" in shown
    assert re.search(r"    ✎ #2 now: `█{20}` 2/2 trials done · 0 running · best val_loss \d", shown), shown
    assert f"*Results of `{job}`*: 2 of 2 trials finished, best registered as `tiny-transformer` v" in shown
    assert re.search(r"\[\d+\] Promote best to staging  \[\d+\] Diagnose", shown)
    assert re.search(r"Asked by @alice · 0/1 approvals · approvers: @bob", shown), shown
    assert "bob> click Approve" in shown
    assert re.search(r"to \*staging\*: approved, alias moved\n  Asked by @alice · 1/1 approvals by @bob", shown)
    assert f"(only you) Diagnosing {job}: collecting its evidence; the diagnosis follows in its thread." in shown
    assert re.search(rf"    ↳ #\d+ in the thread of #1: \S+ \*Diagnosis\* of `{job}`: \*compute-bound\*", shown), shown
    # The trials wrote their step timings on CPU: the slowest trial's are read, named, and quoted.
    trial = re.search(
        r"Compute-bound on CPU: the processors are the bottleneck\. Step time is dominated by computation "
        r"\(data \d+%, collectives 0%, compute \d+% of \d+ ms steps\)\. Step timings: trial (\S+), the slowest "
        r"of the sweep's 2 trials that wrote step timings \(mean step \d+ ms; the fastest, \S+, \d+ ms\)\.",
        shown,
    )
    assert trial, shown
    assert re.search(rf'`steps/{re.escape(trial[1])}--rank-0\.jsonl:\d+` `\{{"rank": 0, .*"device": "cpu"\}}`', shown)
    assert "It ran on 1 CPU worker and no GPU" in shown and "the GPUs are the bottleneck" not in shown
    assert "insufficient-evidence" not in shown
    # The runbook's beginning in the thread, the whole page as a file beside it.
    assert "Mitigation steps 3 to 6 and the rest of the runbook: `compute-bound.md`, attached below" in shown
    page = re.search(r"📎 Runbook: Step time dominated by computation: (\S+/compute-bound\.md) \(\d+ bytes\)", shown)
    assert page and Path(page[1]).read_text() == (PLAYBOOKS / "compute-bound.md").read_text()


def test_the_scale_example_studies_one_and_two_workers_and_posts_the_table_and_the_chart(ray_env):
    result = trainbot(ray_env, "console", "--as", "alice", "--script", str(EXAMPLES / "scale.txt"), check=False)
    shown = result.stdout
    assert result.returncode == 0, shown + result.stderr
    ack = re.search(
        r"\(only you\) Studying tiny-transformer at 1, 2 workers as (tiny-transformer-scale-\w+); its thread", shown
    )
    assert ack, shown
    study = ack[1]
    assert re.search(rf"#1 trainbot in C0CONSOLE: ⏳ `{study}`  \*starting\*", shown), shown
    one, two = re.findall(r"↳ #\d+ in the thread of #1: Launched (tiny-transformer-\w+), point [12] of 2", shown)
    assert f"✎ #1 now: ▶ `{study}`  *point 2 of 2*: {two} (2 workers) RUNNING" in shown
    assert re.search(rf"↳ #\d+ in the thread of #1: \*Scaling study {study}: succeeded\*\n", shown), shown
    # Both rows measured on the real head: samples/s, speedup, efficiency and the step's phases.
    for workers, job in ((1, one), (2, two)):
        row = rf"\n +{workers} +0 +16 +\d+\.\d +\d\.\d\dx +\d\.\d\d +\d+%/\d+%/\d+% +{job}\n"
        assert re.search(row, shown), shown
    chart = re.search(rf"📎 Scaling of {study}: (\S+/{study}\.png) \((\d+) bytes\)", shown)
    assert chart, shown
    assert Image.open(chart[1]).size == (WIDTH_IN * DPI, PANEL_HEIGHT_IN * 2 * DPI)
    assert re.search(rf"✎ #1 now: ✅ `{study}`  \*succeeded\*: efficiency 1\.00 at 1, \d\.\d\d at 2, ", shown), shown
    # Each point's job told its launch and end in the study's thread, and opened no thread of its own.
    assert len(re.findall(r"^#\d+ trainbot in C0CONSOLE", shown, re.MULTILINE)) == 1, shown


@pytest.fixture
def console_settings(tmp_path: Path) -> Settings:
    """Embedded defaults in a folder of the test's own; no Ray head answers (none is needed)."""
    return Settings(data_dir=tmp_path, local_dashboard_port=free_port())


@pytest.fixture
def version(console_settings: Settings) -> int:
    """tiny-transformer's version 1 in the sqlite registry of the console's settings, its run finished."""
    client = MlflowClient(tracking_uri=console_settings.tracking_uri(), registry_uri=console_settings.tracking_uri())
    client.create_experiment("sweeps", artifact_location=str(console_settings.data_dir / "artifacts"))
    client.create_registered_model("tiny-transformer")
    return register(client, "tiny-transformer", {"val_loss": 1.5})


def test_a_reject_reason_is_typed_into_the_modal_and_the_request_shows_it(console_settings, version):
    out = io.StringIO()
    script = [
        f"/model promote tiny-transformer {version} staging",
        "click Reject",  # alice asked: she may not decide
        "--as bob click Reject",
        "<!channel> not better than v0",
        "/model requests",
        "click 99",
        "dance",
        "quit",
        "/model requests",  # never read: the console has left
    ]
    assert run_console(console_settings, "alice", script, out) == 0
    shown = out.getvalue()
    assert "(only you) nobody approves their own request" in shown
    assert "alice> --as bob click Reject\n┌ Reject\n" in shown
    assert "│ Why?: type it on the next line" in shown
    assert "rejected: &lt;!channel&gt;" not in shown  # escaped for Slack, shown as typed
    assert re.search(
        r"✎ #1 now: \*Promote\* `tiny-transformer` v1 to \*staging\*: rejected: <!channel> not better", shown
    )
    assert "(no button 99; the numbers are in [brackets])" in shown
    assert "(not a command: 'dance')" in shown
    assert shown.count("alice> /model requests") == 1


def test_the_reject_modal_refuses_an_empty_reason_and_a_command_line_is_never_a_reason(console_settings, version):
    out = io.StringIO()
    script = [
        f"/model promote tiny-transformer {version} staging",
        "--as bob click Reject",
        "# a comment answers nothing",
        "   ",  # an empty reason: Slack's error under the field, and the modal stays open
        "/model requests --open",  # a command: the modal closes and the command runs
        "--as bob click Reject",
        "as carol",
        "--as bob click Reject",
        "not better than v0",
    ]
    started = time.monotonic()
    assert run_console(console_settings, "alice", script, out) == 0
    assert time.monotonic() - started < 25  # the refusal is answered at once: nothing waits for a post
    shown = out.getvalue()
    assert "alice> \n│ Why?: Say why it is rejected.\n│ (the modal is still open" in shown, shown
    assert "(the Reject modal is closed; '/model requests --open' runs as a command)\n(only you) *Promotion" in shown
    assert re.search(r"`pr-\w+  tiny-transformer v1 -> staging  pending`", shown), shown
    assert "(the Reject modal is closed; 'as carol' runs as a command)\n(you are carol now)" in shown
    assert re.search(r"✎ #1 now: \*Promote\* `tiny-transformer` v1 to \*staging\*: rejected: not better than v0", shown)


def test_on_a_terminal_the_prompt_is_drawn_again_below_what_the_bot_says_meanwhile(console_settings):
    # A registry notice queued before the console starts: the bot posts it a moment after the prompt is drawn.
    created = Delivery("d-1", "model_version.created", {"name": "tiny-transformer", "version": "2"}, datetime.now(UTC))
    Promotions(console_settings).events.receive(created, datetime.now(UTC), ["staging"])
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("TRAINBOT_")},
        "TRAINBOT_DATA_DIR": str(console_settings.data_dir),
        "TRAINBOT_LOCAL_DASHBOARD_PORT": str(console_settings.local_dashboard_port),
        "TERM": "xterm",
        "PROMPT_TOOLKIT_NO_CPR": "1",  # no terminal answers where the cursor is here
    }
    terminal, its_end = pty.openpty()
    console = subprocess.Popen([str(TRAINBOT), "console", "--as", "alice"], stdin=its_end, stdout=its_end,
                               stderr=its_end, env=env, start_new_session=True)  # fmt: skip
    os.close(its_end)
    try:
        shown = read_until(terminal, re.compile(r"from an earlier session[^\n]*\n.*alice>", re.DOTALL))
        os.write(terminal, b"quit\r")
        assert console.wait(timeout=30) == 0
    finally:
        console.kill()
        os.close(terminal)
    before, _, after = shown.partition("from an earlier session")
    assert "alice>" in before and "alice>" in after and "WARNING" not in shown, shown


def test_lines_piped_in_get_plain_output(tmp_path):
    env = {"TRAINBOT_DATA_DIR": str(tmp_path), "TRAINBOT_LOCAL_DASHBOARD_PORT": str(free_port()), "TERM": "xterm"}
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TRAINBOT_")}
    result = subprocess.run([str(TRAINBOT), "console", "--as", "alice"], input="help\nquit\n", capture_output=True,
                            text=True, timeout=120, env={**clean, **env}, check=True)  # fmt: skip
    assert "alice> Type /train help or /model help." in result.stdout
    assert "\x1b" not in result.stdout + result.stderr


def read_until(terminal: int, wanted: re.Pattern[str], timeout_s: float = 60) -> str:
    """What the terminal shows (its control sequences left out) until `wanted` is in it."""
    shown, deadline = b"", time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if select.select([terminal], [], [], 0.2)[0]:
            shown += os.read(terminal, 65536)
        text = ANSI_CONTROL.sub("", shown.decode(errors="replace"))
        if wanted.search(text):
            return text
    raise AssertionError(f"no {wanted.pattern!r} on the terminal within {timeout_s} s:\n{text}")


def test_a_script_that_cannot_be_read_is_one_clear_line(ray_env, tmp_path):
    result = trainbot(ray_env, "console", "--script", str(tmp_path / "missing.txt"), check=False)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"trainbot: {tmp_path / 'missing.txt'}: cannot read it as a text script")


def test_one_person_has_one_name_in_the_cli_the_console_and_slack(console_settings, version, tmp_path):
    """Asked in the CLI as alice, approved in the console by bob: every listing names alice and bob."""
    env = {"TRAINBOT_DATA_DIR": str(tmp_path), "TRAINBOT_LOCAL_DASHBOARD_PORT": str(free_port())}
    asked = trainbot(
        env, "model", "promote", "tiny-transformer", str(version), "staging", "--as", "alice", "-o", "json"
    )
    request_id = json.loads(asked.stdout)["id"]
    out = io.StringIO()
    assert run_console(console_settings, "bob", [f"/model approve {request_id}", "/model requests"], out) == 0
    shown = out.getvalue()
    assert (
        f"(only you) `{request_id}  tiny-transformer v1 -> staging  approved`  (1/1 approvals by @bob; asked by @alice)"
        in shown
    )
    assert "UBOB" not in shown and "UALICE" not in shown, shown
    listed = trainbot(env, "model", "requests").stdout
    assert f"{request_id}  tiny-transformer v1 -> staging  approved  (1/1 approvals by bob; asked by alice)" in listed


def test_a_job_launched_in_the_console_is_its_launcher_s_by_name_in_the_cli(tmp_path, kubeconfig):
    """Launched in the console as alice (UALICE to the bot), on the KubeRay stand-in: the job records alice, so
    `trainbot jobs` says alice where it said UALICE, and the console's jobs list mentions her."""
    settings = Settings(
        data_dir=tmp_path / "data", backend="kuberay", namespace="default", local_dashboard_port=free_port()
    )
    out = io.StringIO()
    assert run_console(settings, "alice", ["/train launch tiny-transformer", "/train jobs"], out) == 0
    shown = out.getvalue()
    launched = re.search(r"Launched (tiny-transformer-[a-z0-9]+);", shown)
    assert launched, shown
    job = launched[1]
    assert f"`{job}`  *PENDING*  tiny-transformer on kuberay, by @alice, " in shown
    assert "UALICE" not in shown, shown
    env = {
        "TRAINBOT_DATA_DIR": str(settings.data_dir),
        "TRAINBOT_BACKEND": "kuberay",
        "TRAINBOT_NAMESPACE": "default",
        "KUBECONFIG": str(kubeconfig),
    }
    assert [
        (record["name"], record["requester"]) for record in json.loads(trainbot(env, "jobs", "-o", "json").stdout)
    ] == [(job, "alice")]
    listed = trainbot(env, "jobs").stdout
    assert re.search(rf"^{job}  PENDING  kuberay  tiny-transformer  alice ", listed, re.MULTILINE), listed


def test_library_logs_go_to_the_log_file_not_the_terminal(tmp_path):
    """A fresh data directory: MLflow creates its tables and says so, in the log file only."""
    script = tmp_path / "promote.txt"
    script.write_text("/model promote tiny-transformer 1 staging\n")
    env = {"TRAINBOT_DATA_DIR": str(tmp_path / "data"), "TRAINBOT_LOCAL_DASHBOARD_PORT": str(free_port())}
    result = trainbot(env, "console", "--as", "alice", "--script", str(script))
    assert "(only you) ⚠ MLflow has no tiny-transformer version 1" in result.stdout
    assert "mlflow" not in result.stdout + result.stderr, result.stdout + result.stderr
    assert result.stderr == ""
    assert (
        "mlflow.store.db.utils: Creating initial MLflow database tables"
        in (tmp_path / "data" / "console.log").read_text()
    )
