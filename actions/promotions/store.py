"""Promotion requests, their approvals and their audit trail, in the state store's database.

Exactly once comes from the database, not from a lock in one process:
- every change starts by touching the request's row (an UPDATE), which takes sqlite's write lock or
  PostgreSQL's row lock, so the reads that follow see every earlier change and nobody else's until commit;
- an approval is a row with (request, approver) as its key, so a second click adds nothing;
- the request that collects its last approval moves to `approving` in that same transaction; the alias
  move is then claimed with a lease (an outbox): whoever holds the claim moves the alias and records
  `approved`; a process that died holding it loses the claim when the lease runs out, and the next
  start re-applies (setting an alias to the version it already names is a no-op in MLflow);
- at most one open request per model and target: `open_key` is unique and cleared when it closes.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    RowMapping,
    and_,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from actions.errors import Conflict, NotFound
from actions.state.database import Database, check_lengths
from actions.state.tables import promotion_approvals, promotion_events, promotion_requests


class PromotionState(StrEnum):
    PENDING = "pending"
    # Approved, the alias move not yet done (the outbox); the outcome of a crash before the move.
    APPROVING = "approving"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    FAILED = "failed"


OPEN_STATES = (PromotionState.PENDING, PromotionState.APPROVING, PromotionState.FAILED)
REQUEST_LIST_HINT = "`trainbot model requests` lists them"


@dataclass(frozen=True)
class PromotionRequest:
    id: str
    model: str
    version: int
    target: str
    kind: str
    requester: str
    state: PromotionState
    approvals_needed: int
    created_at: datetime
    expires_at: datetime
    updated_at: datetime
    reason: str | None = None
    previous_version: int | None = None
    move_started_at: datetime | None = None
    # When MLflow's webhook announced the move (registry_events.py); None without webhooks.
    announced_at: datetime | None = None
    approvals: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "model": self.model,
            "version": self.version,
            "target": self.target,
            "kind": self.kind,
            "requester": self.requester,
            "state": self.state.value,
            "approvals": list(self.approvals),
            "approvals_needed": self.approvals_needed,
            "reason": self.reason,
            "previous_version": self.previous_version,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


@dataclass(frozen=True)
class PromotionEvent:
    request_id: str | None
    model: str
    target: str
    version: int | None
    event: str
    actor: str
    at: datetime
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "request": self.request_id,
            "model": self.model,
            "target": self.target,
            "version": self.version,
            "event": self.event,
            "actor": self.actor,
            "at": self.at.isoformat(),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Approval:
    """What one approve call did: the request after it, whether this click counted, whether it completed."""

    request: PromotionRequest
    counted: bool
    completed: bool


class PromotionStore(Database):
    def create(
        self,
        *,
        model: str,
        version: int,
        target: str,
        kind: str,
        requester: str,
        approvals_needed: int,
        expires_in: timedelta,
        at: datetime,
    ) -> PromotionRequest:
        request_id = f"pr-{secrets.token_hex(4)}"
        row = {
            "id": request_id,
            "model": model,
            "version": version,
            "target": target,
            "kind": kind,
            "requester": requester,
            "state": PromotionState.PENDING.value,
            "approvals_needed": approvals_needed,
            "open_key": _open_key(model, target),
            "created_at": at,
            "expires_at": at + expires_in,
            "updated_at": at,
        }
        check_lengths(promotion_requests, row)
        try:
            with self.engine.begin() as conn:
                conn.execute(promotion_requests.insert().values(row))
                request = _read(conn, request_id)
                _event(conn, request, kind, requester, at, f"v{version} to {target}")
                return request
        except IntegrityError:
            holder = self._open_request(model, target)
            raise Conflict(
                f"{model} already has an open request for {target}"
                + (f": {holder.id} ({holder.state.value}, v{holder.version})" if holder else "")
                + "; approve, reject or cancel it first"
            ) from None

    def get(self, request_id: str) -> PromotionRequest:
        with self.engine.connect() as conn:
            return _read(conn, request_id)

    def list_requests(
        self, *, states: Iterable[PromotionState] | None = None, model: str | None = None
    ) -> list[PromotionRequest]:
        query = select(promotion_requests.c.id).order_by(
            promotion_requests.c.created_at.desc(), promotion_requests.c.id
        )
        if states is not None:
            query = query.where(promotion_requests.c.state.in_([state.value for state in states]))
        if model is not None:
            query = query.where(promotion_requests.c.model == model)
        with self.engine.connect() as conn:
            return [_read(conn, request_id) for request_id in conn.scalars(query)]

    def approve(
        self,
        request_id: str,
        approver: str,
        at: datetime,
        allowed: Callable[[PromotionRequest], None],
        lease: timedelta = timedelta(0),
    ) -> Approval:
        """Record `approver`'s approval; `allowed` raises when they may not approve this request.

        Clicks on a request that is no longer pending count for nothing; a pending request past its
        expiry becomes `expired` (the caller says so). The approval that completes the count also takes the
        alias move for `lease`, in the same transaction: a sweeper finishing others' moves cannot take it from
        the approver between the two.
        """
        with self.engine.begin() as conn:
            request = _locked(conn, request_id, at)
            allowed(request)
            if request.state != PromotionState.PENDING:
                return Approval(request, counted=False, completed=False)
            if at >= request.expires_at:
                _close(conn, request, PromotionState.EXPIRED, "system", at, "expired before its approvals")
                return Approval(_read(conn, request_id), counted=False, completed=False)
            approval = {"request_id": request_id, "approver": approver, "at": at}
            if self.insert_new(conn, promotion_approvals, approval) is None:
                return Approval(request, counted=False, completed=False)
            _event(conn, request, "approval", approver, at, None)
            given = conn.scalar(select(func.count()).where(promotion_approvals.c.request_id == request_id)) or 0
            completed = given >= request.approvals_needed
            if completed:
                _set(
                    conn,
                    request_id,
                    at,
                    state=PromotionState.APPROVING.value,
                    lease_until=at + lease if lease else None,
                )
                _event(conn, request, "approvals-met", approver, at, f"{given} of {request.approvals_needed}")
            return Approval(_read(conn, request_id), counted=True, completed=completed)

    def end(
        self,
        request_id: str,
        to: PromotionState,
        actor: str,
        at: datetime,
        allowed: Callable[[PromotionRequest], None],
        reason: str | None = None,
        from_states: tuple[PromotionState, ...] = (PromotionState.PENDING,),
    ) -> PromotionRequest:
        """Reject, cancel or expire: a request in one of `from_states` ends in `to`; Conflict otherwise."""
        with self.engine.begin() as conn:
            request = _locked(conn, request_id, at)
            allowed(request)
            if request.state not in from_states:
                raise Conflict(f"{request_id} is {request.state.value}, not {' or '.join(from_states)}")
            _close(conn, request, to, actor, at, reason)
            return _read(conn, request_id)

    def retry(self, request_id: str, actor: str, at: datetime, allowed: Callable[[PromotionRequest], None]) -> bool:
        """Put a failed request back in the outbox; False when it is not failed (nothing to retry)."""
        with self.engine.begin() as conn:
            request = _locked(conn, request_id, at)
            allowed(request)
            if request.state != PromotionState.FAILED:
                return False
            _set(conn, request_id, at, state=PromotionState.APPROVING.value, lease_until=None)
            _event(conn, request, "retry", actor, at, None)
            return True

    def claim_apply(self, request_id: str, at: datetime, lease: timedelta) -> bool:
        """Take the alias move of an `approving` request for `lease`; False if someone else holds it."""
        claim = (
            update(promotion_requests)
            .where(promotion_requests.c.id == request_id, _move_due(at))
            .values(lease_until=at + lease, updated_at=at)
        )
        with self.engine.begin() as conn:
            return conn.execute(claim).rowcount == 1

    def begin_move(self, request_id: str, holder: int | None, at: datetime) -> PromotionRequest:
        """Record what the alias names before the first attempt to move it; a re-apply keeps the first."""
        with self.engine.begin() as conn:
            request = _locked(conn, request_id, at)
            if request.move_started_at is None:
                _set(conn, request_id, at, previous_version=holder, move_started_at=at)
            return _read(conn, request_id)

    def finish_apply(self, request_id: str, at: datetime) -> PromotionRequest:
        with self.engine.begin() as conn:
            request = _locked(conn, request_id, at)
            if request.state != PromotionState.APPROVING:
                return request
            was = f" (was v{request.previous_version})" if request.previous_version is not None else ""
            _close(
                conn,
                request,
                PromotionState.APPROVED,
                "trainbot",
                at,
                None,
                f"{request.target} -> v{request.version}{was}",
            )
            return _read(conn, request_id)

    def fail_apply(self, request_id: str, error: str, at: datetime) -> PromotionRequest:
        """The alias move failed (MLflow refused or was down): `failed`, still open, retryable."""
        with self.engine.begin() as conn:
            request = _locked(conn, request_id, at)
            if request.state == PromotionState.APPROVING:
                _set(conn, request_id, at, state=PromotionState.FAILED.value, lease_until=None, reason=error)
                _event(conn, request, "failed", "trainbot", at, error)
            return _read(conn, request_id)

    def outbox(self, at: datetime) -> list[str]:
        """Requests whose alias move is due: approved, and unclaimed or their claim run out."""
        query = select(promotion_requests.c.id).where(_move_due(at))
        with self.engine.connect() as conn:
            return list(conn.scalars(query))

    def expire_due(self, at: datetime) -> list[PromotionRequest]:
        due = select(promotion_requests.c.id).where(
            promotion_requests.c.state == PromotionState.PENDING.value, promotion_requests.c.expires_at <= at
        )
        expired = []
        with self.engine.connect() as conn:
            candidates = list(conn.scalars(due))
        for request_id in candidates:
            with self.engine.begin() as conn:
                request = _locked(conn, request_id, at)
                if request.state == PromotionState.PENDING and request.expires_at <= at:
                    _close(conn, request, PromotionState.EXPIRED, "system", at, "no decision before it expired")
                    expired.append(_read(conn, request_id))
        return expired

    def moves(self, model: str, target: str) -> list[PromotionRequest]:
        """The requests that moved `target`, oldest first."""
        query = (
            select(promotion_requests.c.id)
            .where(
                promotion_requests.c.model == model,
                promotion_requests.c.target == target,
                promotion_requests.c.state == PromotionState.APPROVED.value,
            )
            .order_by(promotion_requests.c.move_started_at, promotion_requests.c.id)
        )
        with self.engine.connect() as conn:
            return [_read(conn, request_id) for request_id in conn.scalars(query)]

    def history(self, model: str) -> list[PromotionEvent]:
        query = select(promotion_events).where(promotion_events.c.model == model).order_by(promotion_events.c.id)
        with self.engine.connect() as conn:
            return [PromotionEvent(**_event_fields(row)) for row in conn.execute(query).mappings()]

    def _open_request(self, model: str, target: str) -> PromotionRequest | None:
        with self.engine.connect() as conn:
            request_id = conn.scalar(
                select(promotion_requests.c.id).where(promotion_requests.c.open_key == _open_key(model, target))
            )
            return _read(conn, request_id) if request_id else None


def _move_due(at: datetime) -> ColumnElement[bool]:
    """An approved request whose alias move nobody holds: never claimed, or its claim run out."""
    return and_(
        promotion_requests.c.state == PromotionState.APPROVING.value,
        or_(promotion_requests.c.lease_until.is_(None), promotion_requests.c.lease_until < at),
    )


def _open_key(model: str, target: str) -> str:
    return f"{model}\n{target}"


def _locked(conn: Connection, request_id: str, at: datetime) -> PromotionRequest:
    """Touch the row first, so this transaction holds the write lock before it reads anything."""
    touched = conn.execute(
        update(promotion_requests).where(promotion_requests.c.id == request_id).values(updated_at=at)
    )
    if touched.rowcount == 0:
        raise NotFound(f"no promotion request {request_id}; {REQUEST_LIST_HINT}")
    return _read(conn, request_id)


def _set(conn: Connection, request_id: str, at: datetime, **values: Any) -> None:
    conn.execute(
        update(promotion_requests).where(promotion_requests.c.id == request_id).values(updated_at=at, **values)
    )


def _close(
    conn: Connection,
    request: PromotionRequest,
    to: PromotionState,
    actor: str,
    at: datetime,
    reason: str | None,
    detail: str | None = None,
) -> None:
    values: dict[str, Any] = {"state": to.value, "open_key": None, "lease_until": None}
    if reason is not None:
        values["reason"] = reason
    _set(conn, request.id, at, **values)
    _event(conn, request, to.value, actor, at, detail or reason)


def _event(
    conn: Connection, request: PromotionRequest, name: str, actor: str, at: datetime, detail: str | None
) -> None:
    record_event(
        conn, PromotionEvent(request.id, request.model, request.target, request.version, name, actor, at, detail)
    )


def record_event(conn: Connection, event: PromotionEvent) -> None:
    """One line of a model's audit trail; its fields are the table's columns."""
    values = asdict(event)
    check_lengths(promotion_events, values)
    conn.execute(promotion_events.insert().values(values))


def _read(conn: Connection, request_id: str) -> PromotionRequest:
    row = conn.execute(select(promotion_requests).where(promotion_requests.c.id == request_id)).mappings().first()
    if row is None:
        raise NotFound(f"no promotion request {request_id}; {REQUEST_LIST_HINT}")
    given = conn.scalars(
        select(promotion_approvals.c.approver)
        .where(promotion_approvals.c.request_id == request_id)
        .order_by(promotion_approvals.c.at)
    )
    return PromotionRequest(
        id=row["id"],
        model=row["model"],
        version=row["version"],
        target=row["target"],
        kind=row["kind"],
        requester=row["requester"],
        state=PromotionState(row["state"]),
        approvals_needed=row["approvals_needed"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        updated_at=row["updated_at"],
        reason=row["reason"],
        previous_version=row["previous_version"],
        move_started_at=row["move_started_at"],
        announced_at=row["announced_at"],
        approvals=tuple(given),
    )


def _event_fields(row: RowMapping) -> dict[str, Any]:
    return {field.name: row[field.name] for field in fields(PromotionEvent)}


def now() -> datetime:
    return datetime.now(UTC)
