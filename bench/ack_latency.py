"""How fast trainbot acks Slack, next to a bare Bolt app on the same server stack, in one run.

Both run as `serve` processes on the same server, bot/http/server.py's (waitress), against the local Slack stand-in
(a third process, so that taking trainbot's replies costs the measuring process nothing).
Each gets 200 signed `/train status` requests, 20 at a time, in alternating rounds so that noise on
this shared machine falls on both. It prints p50 and p99 of the time to Slack's 200 for each, the
ratio, and trainbot's resident memory while idle. Goal: trainbot p99 <= 50 ms and <= 1.5x the bare app.

    .venv/bin/python -m bench.ack_latency
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import requests

from bot.console.local_slack import LocalSlack, signed_headers, slash_command_body
from tests.servers.processes import free_port, serving

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

SECRET = "bench-signing-secret"
REQUESTS, CONCURRENCY, ROUNDS = 200, 20, 4
GOAL_P99_MS, GOAL_RATIO = 50.0, 1.5
TRAINBOT = Path(sys.executable).with_name("trainbot")


def serve_bare(port: int) -> None:
    """The bare arm: a Bolt app whose /train only acks, on trainbot's server (bot/http/server.py)."""
    from slack_bolt import App  # noqa: PLC0415
    from slack_bolt.adapter.wsgi import SlackRequestHandler  # noqa: PLC0415
    from slack_sdk import WebClient  # noqa: PLC0415

    from bot.http.server import serve  # noqa: PLC0415

    client = WebClient(token="xoxb-bench", base_url=os.environ["TRAINBOT_SLACK_API_URL"])
    # Bolt's mode that trainbot uses: acks answered in the request's thread.
    app = App(client=client, signing_secret=SECRET, process_before_response=True)
    app.command("/train")(lambda ack: ack())
    slack = SlackRequestHandler(app)

    def with_healthz(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/healthz":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]
        return slack(environ, start_response)

    serve(with_healthz, "127.0.0.1", port)


def _timed(url: str, body: str) -> float:
    started = time.perf_counter()
    answer = requests.post(url, data=body.encode(), headers=signed_headers(SECRET, body), timeout=30)
    elapsed = time.perf_counter() - started
    if answer.status_code != 200:
        raise SystemExit(f"{url} answered {answer.status_code}: {answer.text[:200]}")
    return elapsed * 1000


def _round(url: str, slack: LocalSlack, count: int) -> list[float]:
    bodies = [slash_command_body(slack, "/train", "status tiny-transformer-bench") for _ in range(count)]
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        return list(pool.map(lambda body: _timed(url, body), bodies))


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49], cuts[98]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="trainbot-bench-") as scratch:
        logs = Path(scratch)
        slack = LocalSlack(f"http://127.0.0.1:{free_port()}")
        stand_in = [sys.executable, "-m", "bot.console.local_slack", slack.url.rsplit(":", 1)[1]]
        env = {
            **{key: value for key, value in os.environ.items() if not key.startswith(("TRAINBOT_", "SLACK_"))},
            "SLACK_BOT_TOKEN": "xoxb-bench",
            "SLACK_SIGNING_SECRET": SECRET,
            "TRAINBOT_SLACK_API_URL": slack.api_url,
            "TRAINBOT_DATA_DIR": scratch,
            "TRAINBOT_LOCAL_DASHBOARD_PORT": str(free_port()),  # no Ray head: status answers at once
            "TRAINBOT_LOG_LEVEL": "WARNING",
        }
        ports = {"trainbot": free_port(), "bare": free_port()}
        commands = {
            "trainbot": [str(TRAINBOT), "serve", "--port", str(ports["trainbot"])],
            "bare": [sys.executable, "-m", "bench.ack_latency", "--bare", str(ports["bare"])],
        }
        with (
            serving(stand_in, logs / "slack.log", slack.url),
            serving(
                commands["trainbot"], logs / "trainbot.log", f"http://127.0.0.1:{ports['trainbot']}/healthz", env
            ) as trainbot,
            serving(commands["bare"], logs / "bare.log", f"http://127.0.0.1:{ports['bare']}/healthz", env),
        ):
            idle_rss = _rss_mb(trainbot.pid)
            urls = {arm: f"http://127.0.0.1:{port}/slack/events" for arm, port in ports.items()}
            samples: dict[str, list[float]] = {"trainbot": [], "bare": []}
            for warm_up in urls.values():
                _round(warm_up, slack, CONCURRENCY)
            for index in range(ROUNDS):
                order = ("trainbot", "bare") if index % 2 == 0 else ("bare", "trainbot")
                for arm in order:
                    samples[arm] += _round(urls[arm], slack, REQUESTS // ROUNDS)
    (t50, t99), (b50, b99) = _percentiles(samples["trainbot"]), _percentiles(samples["bare"])
    print(f"{REQUESTS} signed /train status requests per arm, {CONCURRENCY} at a time, {ROUNDS} alternating rounds")
    print("  both arms on waitress (bot/http/server.py)")
    print(f"  trainbot   p50 {t50:6.1f} ms   p99 {t99:6.1f} ms")
    print(f"  bare Bolt  p50 {b50:6.1f} ms   p99 {b99:6.1f} ms")
    verdict = "meets" if t99 / b99 <= GOAL_RATIO else "misses"
    ratios = f"p50 {t50 / b50:.2f}x   p99 {t99 / b99:.2f}x"
    print(f"  ratio (trainbot / bare)  {ratios}  ({verdict} the p99 goal <= {GOAL_RATIO}x)")
    print(f"  trainbot p99 {'meets' if t99 <= GOAL_P99_MS else 'misses'} the {GOAL_P99_MS:g} ms goal")
    print(f"  trainbot serve idle RSS: {idle_rss:.0f} MB")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--bare"]:
        serve_bare(int(sys.argv[2]))
    else:
        main()
