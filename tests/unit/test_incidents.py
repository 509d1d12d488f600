"""bot/incidents.py: an incident is counted, its traceback kept in the log or a report file, its id returned."""

from __future__ import annotations

import logging

from bot.incidents import record_incident


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
