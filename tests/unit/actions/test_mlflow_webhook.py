"""Checking an MLflow webhook delivery: MLflow's own signer is the reference, so a drift in its format shows."""

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from mlflow.webhooks.delivery import _generate_hmac_signature

from actions.errors import BadRequest, Unauthorized, Unavailable
from bot.http.server import BodyRefused
from bot.web.mlflow_webhook import (
    DELIVERY_HEADER,
    MAX_BODY_BYTES,
    REPLAY_WINDOW,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    request_delivery,
    signature,
    verified_delivery,
)

SECRET = "s3cret-from-the-webhook"
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
PAYLOAD = {
    "entity": "model_version_alias",
    "action": "created",
    "timestamp": NOW.isoformat(),
    "data": {"name": "tiny-transformer", "alias": "staging", "version": "3"},
}


def signed(payload: object = PAYLOAD, at: datetime = NOW, secret: str = SECRET) -> tuple[dict[str, str], bytes]:
    """Headers and body exactly as MLflow's delivery code builds them."""
    body = json.dumps(payload)
    timestamp = str(int(at.timestamp()))
    headers = {
        DELIVERY_HEADER: "0b9c7c3e-delivery",
        TIMESTAMP_HEADER: timestamp,
        SIGNATURE_HEADER: _generate_hmac_signature(secret, "0b9c7c3e-delivery", timestamp, body),
    }
    return headers, body.encode()


def test_a_delivery_signed_by_mlflow_is_read():
    delivery = verified_delivery(SECRET, *signed(), NOW + timedelta(seconds=3))
    assert (delivery.id, delivery.event, delivery.data["alias"], delivery.sent_at) == (
        "0b9c7c3e-delivery",
        "model_version_alias.created",
        "staging",
        NOW,
    )


def test_another_secret_is_refused_with_the_setting_to_check():
    with pytest.raises(Unauthorized, match="differs from TRAINBOT_MLFLOW_WEBHOOK_SECRET"):
        verified_delivery(SECRET, *signed(secret="someone-else"), NOW)


def test_a_changed_body_or_delivery_id_breaks_the_signature():
    headers, body = signed()
    with pytest.raises(Unauthorized, match="signature does not match"):
        verified_delivery(SECRET, headers, body.replace(b'"3"', b'"4"'), NOW)
    with pytest.raises(Unauthorized, match="signature does not match"):
        verified_delivery(SECRET, {**headers, DELIVERY_HEADER: "another-delivery"}, body, NOW)


@pytest.mark.parametrize("missing", [DELIVERY_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER])
def test_an_unsigned_delivery_is_refused(missing):
    headers, body = signed()
    del headers[missing]
    with pytest.raises(Unauthorized, match="not a signed MLflow delivery"):
        verified_delivery(SECRET, headers, body, NOW)


@pytest.mark.parametrize("skew", [REPLAY_WINDOW + timedelta(seconds=1), -(REPLAY_WINDOW + timedelta(seconds=1))])
def test_a_delivery_signed_too_long_ago_or_ahead_is_a_replay(skew):
    with pytest.raises(Unauthorized, match="a replay, or a clock out of step"):
        verified_delivery(SECRET, *signed(at=NOW - skew), NOW)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("not an object", "no `data` object"),
        ({"entity": "model_version", "data": {}}, "names no `entity` and `action`"),
        ({"entity": "model_version", "action": "created", "data": []}, "no `data` object"),
    ],
)
def test_a_signed_body_that_is_no_mlflow_event_is_a_bad_request(payload, message):
    with pytest.raises(BadRequest, match=message):
        verified_delivery(SECRET, *signed(payload), NOW)


def test_a_signed_body_that_is_not_json_is_a_bad_request():
    headers, _ = signed()
    body = b"\xff{not json"
    headers[SIGNATURE_HEADER] = signature(SECRET, headers[DELIVERY_HEADER], headers[TIMESTAMP_HEADER], body)
    with pytest.raises(BadRequest, match="not JSON"):
        verified_delivery(SECRET, headers, body, NOW)


def test_our_signer_agrees_with_mlflows():
    headers, body = signed()
    assert signature(SECRET, headers[DELIVERY_HEADER], headers[TIMESTAMP_HEADER], body) == headers[SIGNATURE_HEADER]


def request(headers: dict[str, str], body: bytes) -> dict[str, object]:
    """The WSGI environ of a POST carrying `headers` and `body`."""
    cgi_headers = {"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()}
    return {**cgi_headers, "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}


def test_a_request_s_headers_and_body_are_the_delivery():
    delivery = request_delivery(request(*signed()), SECRET, NOW)
    assert (delivery.id, delivery.event) == ("0b9c7c3e-delivery", "model_version_alias.created")


def test_without_a_secret_no_request_is_read_as_a_delivery():
    with pytest.raises(Unavailable, match="TRAINBOT_MLFLOW_WEBHOOK_SECRET is not set"):
        request_delivery(request(*signed()), "", NOW)


def test_a_body_over_the_limit_is_refused_before_the_secret_is_asked_for():
    headers, _ = signed()
    with pytest.raises(BodyRefused, match=f"at most {MAX_BODY_BYTES}"):
        request_delivery(request(headers, b"x" * (MAX_BODY_BYTES + 1)), "", NOW)
