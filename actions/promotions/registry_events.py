"""What MLflow's webhooks announce about the registry, turned into notices for the bot to post.

- model_version.created: an offer to request a promotion of the new version;
- model_version_alias.created: explained when the latest request that moved this alias (approved, or
  with its move under way) points it at that version and no earlier announcement used it up; anything
  else is out-of-band, since every move trainbot makes goes through such a request;
- model_version_alias.deleted: always out-of-band (trainbot never deletes an alias).
Out-of-band changes also go into the model's audit trail. Each delivery is handled once: its id is
the key of a row written in the same transaction as its notices, so MLflow's retries add nothing.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, select, update

from actions.errors import BadRequest
from actions.promotions.deliveries import Delivery
from actions.promotions.store import PromotionEvent, PromotionState, record_event
from actions.state.database import Database
from actions.state.tables import mlflow_deliveries, promotion_notices, promotion_requests

MOVED_STATES = (PromotionState.APPROVING, PromotionState.APPROVED, PromotionState.FAILED)
MLFLOW_ACTOR = "mlflow"


class NoticeKind(StrEnum):
    OFFER = "offer"
    OUT_OF_BAND = "out-of-band"


@dataclass(frozen=True)
class Notice:
    id: int
    kind: NoticeKind
    model: str
    version: int | None
    alias: str | None
    text: str
    created_at: datetime | None = None  # when it was stored (None: a draft, not stored yet)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "model": self.model,
            "version": self.version,
            "alias": self.alias,
            "text": self.text,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }


@dataclass(frozen=True)
class Receipt:
    delivery: str
    event: str
    duplicate: bool
    notices: tuple[Notice, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "delivery": self.delivery,
            "event": self.event,
            "duplicate": self.duplicate,
            "notices": [notice.to_dict() for notice in self.notices],
        }


class RegistryEvents(Database):
    def receive(self, delivery: Delivery, at: datetime, targets: Sequence[str]) -> Receipt:
        """Record the delivery and the notices it raises, once; a delivery seen before raises none."""
        with self.engine.begin() as conn:
            first = {"id": delivery.id, "event": delivery.event, "received_at": at}
            if self.insert_new(conn, mlflow_deliveries, first) is None:
                return Receipt(delivery.id, delivery.event, duplicate=True)
            drafts = _interpret(conn, delivery, at, targets)
            return Receipt(delivery.id, delivery.event, False, tuple(_record(conn, draft, at) for draft in drafts))

    def unposted(self) -> list[Notice]:
        query = (
            select(promotion_notices).where(promotion_notices.c.posted_at.is_(None)).order_by(promotion_notices.c.id)
        )
        with self.engine.connect() as conn:
            return [_notice(row) for row in conn.execute(query).mappings()]

    def mark_posted(self, notice_id: int, at: datetime) -> bool:
        """True for the one caller that marks it; a second poster skips it."""
        mark = (
            update(promotion_notices)
            .where(promotion_notices.c.id == notice_id, promotion_notices.c.posted_at.is_(None))
            .values(posted_at=at)
        )
        with self.engine.begin() as conn:
            return conn.execute(mark).rowcount == 1


def _interpret(conn: Connection, delivery: Delivery, at: datetime, targets: Sequence[str]) -> list[Notice]:
    data = delivery.data
    if delivery.event == "model_version.created":
        model, version = _text(data, "name"), _version(data)
        command = shlex.join(["trainbot", "model", "promote", model, str(version), targets[0]])
        run = f" from run {data['run_id']}" if isinstance(data.get("run_id"), str) else ""
        text = f"{model} v{version} was registered{run}. To promote it ({', '.join(targets)}): {command}"
        return [Notice(0, NoticeKind.OFFER, model, version, None, text)]
    if delivery.event == "model_version_alias.created":
        model, alias, version = _text(data, "name"), _text(data, "alias"), _version(data)
        if _announced(conn, model, alias, version, at):
            return []
        text = f"{model}@{alias} now names v{version}, and no approved trainbot request moved it there"
        return [_out_of_band(conn, model, alias, version, text, at)]
    if delivery.event == "model_version_alias.deleted":
        model, alias = _text(data, "name"), _text(data, "alias")
        text = f"{model}@{alias} was deleted, outside trainbot (it never deletes an alias)"
        return [_out_of_band(conn, model, alias, None, text, at)]
    return []


def _announced(conn: Connection, model: str, alias: str, version: int, at: datetime) -> bool:
    """Whether this alias change is the move of the latest request that moved the alias, first heard now."""
    latest = conn.execute(
        select(promotion_requests.c.id, promotion_requests.c.version)
        .where(
            promotion_requests.c.model == model,
            promotion_requests.c.target == alias,
            promotion_requests.c.state.in_([state.value for state in MOVED_STATES]),
            promotion_requests.c.move_started_at.is_not(None),
        )
        .order_by(promotion_requests.c.move_started_at.desc(), promotion_requests.c.id.desc())
        .limit(1)
    ).first()
    if latest is None or latest.version != version:
        return False
    # Only the first announcement of a move is its own; a second one is somebody else's move back.
    claim = update(promotion_requests).where(
        promotion_requests.c.id == latest.id, promotion_requests.c.announced_at.is_(None)
    )
    return conn.execute(claim.values(announced_at=at)).rowcount == 1


def _out_of_band(conn: Connection, model: str, alias: str, version: int | None, text: str, at: datetime) -> Notice:
    history = shlex.join(["trainbot", "model", "history", model])
    record_event(
        conn, PromotionEvent(None, model, alias, version, NoticeKind.OUT_OF_BAND.value, MLFLOW_ACTOR, at, text)
    )
    return Notice(0, NoticeKind.OUT_OF_BAND, model, version, alias, f"{text}. `{history}` shows the approved moves.")


def _record(conn: Connection, draft: Notice, at: datetime) -> Notice:
    """Store a notice built with id 0; the stored one, with its id."""
    values = {**draft.to_dict(), "created_at": at}
    del values["id"]
    return replace(
        draft, id=conn.execute(promotion_notices.insert().values(values)).inserted_primary_key[0], created_at=at
    )


def _notice(row: Any) -> Notice:
    return Notice(
        row["id"], NoticeKind(row["kind"]), row["model"], row["version"], row["alias"], row["text"], row["created_at"]
    )


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value or len(value) > 256:
        raise BadRequest(f"the delivery's data.{key} is missing or not a registry name")
    return value


def _version(data: dict[str, Any]) -> int:
    value = data.get("version")
    if not isinstance(value, str) or not value.isdigit():
        raise BadRequest(f"the delivery's data.version {value!r} is not a version number")
    return int(value)
