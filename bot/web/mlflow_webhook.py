"""POST /webhooks/mlflow: an MLflow webhook delivery (MLflow >= 3.3), its HMAC signature checked, its JSON read
into the Delivery that promotions take (actions/promotions/deliveries.py).

MLflow signs `<delivery id>.<unix timestamp>.<body>` with HMAC-SHA256 under the webhook's secret and
sends it as `X-MLflow-Signature: v1,<base64>`. A delivery is accepted only when that signature matches
and its timestamp is within REPLAY_WINDOW of now, so a captured delivery cannot be replayed later
(and one replayed within the window is caught by its delivery id, see actions/promotions/registry_events.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from actions.errors import BadRequest, Unauthorized, Unavailable
from actions.promotions.deliveries import Delivery
from bot.http.bounded_json import NotJSON, read_json
from bot.http.server import read_body

if TYPE_CHECKING:
    from wsgiref.types import WSGIEnvironment

SIGNATURE_HEADER = "X-MLflow-Signature"
TIMESTAMP_HEADER = "X-MLflow-Timestamp"
DELIVERY_HEADER = "X-MLflow-Delivery-Id"
SIGNATURE_VERSION = "v1"
REPLAY_WINDOW = timedelta(minutes=5)
# The largest payload MLflow sends is a model version with its tags and description: far below this.
MAX_BODY_BYTES = 1024 * 1024


def request_delivery(environ: WSGIEnvironment, secret: str, at: datetime) -> Delivery:
    """The delivery a request carries, checked under `secret` at `at`: BodyRefused, Unavailable (no secret to check
    with), Unauthorized or BadRequest otherwise."""
    body = read_body(environ, MAX_BODY_BYTES)
    if not secret:
        raise Unavailable("TRAINBOT_MLFLOW_WEBHOOK_SECRET is not set, so no delivery can be checked; set it")
    headers = {name: environ.get(_cgi_name(name), "") for name in (DELIVERY_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)}
    return verified_delivery(secret, headers, body, at)


def signature(secret: str, delivery_id: str, timestamp: str, body: bytes) -> str:
    signed = f"{delivery_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode()}"


def verified_delivery(secret: str, headers: Mapping[str, str], body: bytes, at: datetime) -> Delivery:
    """The delivery, once its signature and timestamp hold; Unauthorized or BadRequest otherwise."""
    delivery_id, timestamp, sent = (
        headers.get(name, "") for name in (DELIVERY_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)
    )
    if not (delivery_id and timestamp and sent):
        raise Unauthorized(
            f"not a signed MLflow delivery: {DELIVERY_HEADER}, {TIMESTAMP_HEADER} and {SIGNATURE_HEADER} are required; "
            "create the webhook with the secret (trainbot model webhook URL)"
        )
    if not hmac.compare_digest(sent.encode(), signature(secret, delivery_id, timestamp, body).encode()):
        raise Unauthorized(
            "the signature does not match: the webhook's secret in MLflow differs from TRAINBOT_MLFLOW_WEBHOOK_SECRET"
        )
    if not timestamp.isdigit():
        raise Unauthorized(f"{TIMESTAMP_HEADER} {timestamp!r} is not a unix timestamp")
    sent_at = datetime.fromtimestamp(int(timestamp), UTC)
    if abs(at - sent_at) > REPLAY_WINDOW:
        raise Unauthorized(
            f"the delivery was signed at {sent_at:%Y-%m-%d %H:%M:%S} UTC, more than {REPLAY_WINDOW} from now: "
            "a replay, or a clock out of step on the MLflow server or here"
        )
    return Delivery(delivery_id, *_event(body), sent_at)


def _event(body: bytes) -> tuple[str, dict[str, Any]]:
    try:
        document = read_json(body, MAX_BODY_BYTES)
    except NotJSON as error:
        raise BadRequest(f"the delivery is not JSON ({error})") from None
    if not isinstance(document, dict) or not isinstance(document.get("data"), dict):
        raise BadRequest("the delivery has no `data` object; is this an MLflow webhook?")
    entity, action = document.get("entity"), document.get("action")
    if not isinstance(entity, str) or not isinstance(action, str):
        raise BadRequest("the delivery names no `entity` and `action`; is this an MLflow webhook?")
    return f"{entity}.{action}", document["data"]


def _cgi_name(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")
