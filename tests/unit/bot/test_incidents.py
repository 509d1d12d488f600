"""bot/incidents.py: an incident is counted, its traceback kept in the log or a report file, its id returned; the
web server's 500 is one (the CLI's report is in test_cli, Slack's answer in test_slack_commands)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import NoReturn
from wsgiref.simple_server import make_server

import requests

from actions.alerts.notifications import Notification
from actions.alerts.threads import AlertThreads
from actions.promotions.service import Promotions
from actions.settings import Settings
from bot.http.metrics import Metrics
from bot.http.server import in_thread
from bot.incidents import record_incident
from bot.web.app import make_app
from tests.servers.alertmanager import alert, notification


def fail() -> None:
    raise RuntimeError("the traceback of a bug")


def test_an_incident_goes_to_the_log_under_its_id_and_is_counted(caplog):
    counted = []
    try:
        fail()
    except RuntimeError:
        with caplog.at_level(logging.ERROR):
            incident = record_incident("POST /somewhere", count=lambda: counted.append(1))
    assert incident.report is None and len(incident.id) == 12
    [record] = caplog.records
    assert record.getMessage() == f"incident {incident.id} on POST /somewhere"
    assert "the traceback of a bug" in caplog.text
    assert counted == [1]


def test_a_given_id_names_the_incident():
    try:
        fail()
    except RuntimeError:
        assert record_incident("GET /x", incident_id="request-1").id == "request-1"


def test_an_incident_with_a_report_folder_keeps_its_traceback_there_not_in_the_log(tmp_path, caplog):
    try:
        fail()
    except RuntimeError:
        incident = record_incident("trainbot jobs", report_dir=tmp_path)
    assert incident.report == tmp_path / f"incident-{incident.id}.log"
    text = incident.report.read_text(encoding="utf-8")
    assert text.startswith(f"incident {incident.id} on trainbot jobs\nTraceback")
    assert "the traceback of a bug" in text
    assert caplog.records == []


def test_a_route_that_fails_answers_500_naming_the_request_as_its_incident(tmp_path, state_store_url, caplog):
    class Broken(AlertThreads):
        def record(self, notification: Notification, at: datetime) -> NoReturn:
            raise RuntimeError("alert store on fire")

    metrics = Metrics()
    settings = Settings(data_dir=tmp_path, state_store_url=state_store_url)
    app = make_app(Promotions(settings), metrics=metrics, alerts=Broken(state_store_url))
    body = notification([alert({"alertname": "GpuHot", "job": "j"}, datetime(2026, 11, 24, tzinfo=UTC))])
    with in_thread(make_server("127.0.0.1", 0, app)) as url:
        answer = requests.post(f"{url}/alerts/alertmanager", json=body, timeout=10)
    request_id = answer.headers["X-Request-Id"]
    assert (answer.status_code, answer.json()) == (
        500,
        {"error": f"trainbot failed on this request; incident {request_id} is in its log"},
    )
    assert (
        f'incident {request_id} on "POST /alerts/alertmanager"' in caplog.text and "alert store on fire" in caplog.text
    )
    assert metrics.errors.labels(where="http")._value.get() == 1
