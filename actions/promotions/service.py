"""Model promotion with approvals: request, approve, reject, cancel; the alias moves once, on approval.

Targets are MLflow aliases (stages are deprecated since MLflow 2.9). Every transition is in the state
store (promotion_store.py, where exactly-once lives) and mirrored as tags on the model version, so the
registry carries its own audit trail: trainbot.<target>.request, .state, .requested_by, .approved_by, .at.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from functools import cached_property
from urllib.parse import urlsplit

from actions.errors import ActionError, BadRequest, Conflict, Forbidden, Unavailable
from actions.people import People
from actions.promotions.deliveries import EVENTS, Delivery
from actions.promotions.policy import Actor, BeatsCurrent, TargetPolicy, promotion_targets, target_policy
from actions.promotions.registry import MlflowHttp, Registry
from actions.promotions.registry_events import Receipt, RegistryEvents
from actions.promotions.store import (
    OPEN_STATES,
    PromotionEvent,
    PromotionRequest,
    PromotionState,
    PromotionStore,
    now,
)
from actions.settings import Settings

log = logging.getLogger(__name__)

# The default lease on an alias move (Settings.promotion_lease_s).
APPLY_LEASE = timedelta(seconds=Settings.model_fields["promotion_lease_s"].default)
FINISHED_RUN = "FINISHED"
PROMOTE, ROLLBACK = "promote", "rollback"
WEBHOOK_NAME = "trainbot"


class Promotions:
    def __init__(
        self,
        settings: Settings,
        store: PromotionStore | None = None,
        registry: Registry | None = None,
        clock: Callable[[], datetime] = now,
        people: People | None = None,
    ) -> None:
        self.people = people or People(settings.people)
        self.targets = promotion_targets(settings.promotion)
        self.store = store or PromotionStore(settings.state_url())
        self.store.create_schema()
        self.registry = registry or Registry(settings.tracking_uri(), MlflowHttp.of(settings))
        self.clock = clock
        self.state_url = settings.state_url()
        self.webhook_secret = settings.mlflow_webhook_secret.get_secret_value()
        self.apply_lease = timedelta(seconds=settings.promotion_lease_s)

    @cached_property
    def events(self) -> RegistryEvents:
        """What MLflow's webhooks announced (its tables are created with the store's)."""
        return RegistryEvents(self.state_url)

    def request(self, actor: Actor, model: str, version: int, target: str) -> PromotionRequest:
        """A pending request to point `target` at `version`, once the target's checks hold."""
        return self._create(actor, model, version, target, PROMOTE)

    def rollback(self, actor: Actor, model: str, target: str) -> PromotionRequest:
        """A pending request to point `target` back at the version it named before, through the same approvals."""
        holder = self.registry.alias_holder(model, target)
        if holder is None:
            raise BadRequest(f"{model}@{target} names no version; there is nothing to roll back")
        earlier = holders_before(self.store.moves(model, target))
        if not earlier or earlier[-1] != holder:
            raise BadRequest(
                f"{model}@{target} is v{holder}, which no approved request of trainbot's set; "
                f"name the version you want: trainbot model promote {model} VERSION {target}"
            )
        if len(earlier) < 2:
            raise BadRequest(f"{model}@{target} named no version before v{holder}; there is nothing to roll back to")
        return self._create(actor, model, earlier[-2], target, ROLLBACK)

    def _create(self, actor: Actor, model: str, version: int, target: str, kind: str) -> PromotionRequest:
        policy, actor = self._policy(target), self._named(actor)
        policy.check_requester(actor)
        self._check(policy, model, version, beats=kind == PROMOTE)
        request = self.store.create(
            model=model,
            version=version,
            target=target,
            kind=kind,
            requester=actor.user,
            approvals_needed=policy.approvals,
            expires_in=policy.expires,
            at=self.clock(),
        )
        self._mirror(request)
        return request

    def approve(self, actor: Actor, request_id: str) -> PromotionRequest:
        """Count the approval; the one that completes the count moves the alias. Clicking again is harmless."""
        actor = self._named(actor)
        approval = self.store.approve(
            request_id, actor.user, self.clock(), self._approver_check(actor), lease=self.apply_lease
        )
        request = approval.request
        if approval.completed:
            return self._move(request_id)
        if request.state == PromotionState.FAILED and self.store.retry(
            request_id, actor.user, self.clock(), self._approver_check(actor)
        ):
            return self._apply(request_id)
        if request.state == PromotionState.EXPIRED:
            self._mirror(request)
            raise Conflict(f"{request_id} expired at {request.expires_at:%Y-%m-%d %H:%M} UTC; request it again")
        if request.state in (PromotionState.REJECTED, PromotionState.CANCELLED):
            raise Conflict(f"{request_id} was {request.state.value}; nothing to approve")
        if request.state == PromotionState.APPROVING:
            return self._apply(request_id)
        if approval.counted:
            self._mirror(request)
        return request

    def reject(self, actor: Actor, request_id: str, reason: str) -> PromotionRequest:
        if not reason.strip():
            raise BadRequest("say why it is rejected (--reason)")
        actor = self._named(actor)
        request = self.store.end(
            request_id, PromotionState.REJECTED, actor.user, self.clock(), self._approver_check(actor), reason.strip()
        )
        self._mirror(request)
        return request

    def cancel(self, actor: Actor, request_id: str) -> PromotionRequest:
        actor = self._named(actor)

        def requester_only(request: PromotionRequest) -> None:
            if request.requester != actor.user:
                raise Forbidden(f"only {request.requester}, who asked, may cancel {request.id}")

        request = self.store.end(
            request_id,
            PromotionState.CANCELLED,
            actor.user,
            self.clock(),
            requester_only,
            from_states=(PromotionState.PENDING, PromotionState.FAILED),
        )
        self._mirror(request)
        return request

    def decidable(self, actor: Actor, request_id: str) -> PromotionRequest:
        """The request, if `actor` may approve or reject it; Forbidden says why not."""
        request = self.store.get(request_id)
        self._approver_check(self._named(actor))(request)
        return request

    def requests(self, *, open_only: bool = False, model: str | None = None) -> list[PromotionRequest]:
        for expired in self.store.expire_due(self.clock()):
            self._mirror(expired)
        return self.store.list_requests(states=OPEN_STATES if open_only else None, model=model)

    def history(self, model: str) -> list[PromotionEvent]:
        return self.store.history(model)

    def register_webhook(self, url: str) -> str:
        """Have the MLflow server send trainbot its registry events, signed: "created" or "updated"."""
        uri = self.registry.tracking_uri
        if not uri.startswith(("http://", "https://")):
            raise BadRequest(
                f"only an MLflow server sends webhooks, and TRAINBOT_MLFLOW_TRACKING_URI is {uri}; "
                "point it at the server (http://HOST:5000)"
            )
        if not self.webhook_secret:
            raise BadRequest(
                "set TRAINBOT_MLFLOW_WEBHOOK_SECRET first (a long random string: openssl rand -hex 32); "
                "trainbot checks every delivery's signature with it"
            )
        parsed = urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise BadRequest(f"{url!r} is not an http(s) URL; give trainbot serve's, ending in /webhooks/mlflow")
        return self.registry.register_webhook(WEBHOOK_NAME, url, EVENTS, self.webhook_secret)

    def announce(self, delivery: Delivery) -> Receipt:
        """A webhook delivery from MLflow, its signature checked under webhook_secret (bot/web/mlflow_webhook.py),
        handled once: the notices it raises for the bot."""
        return self.events.receive(delivery, self.clock(), list(self.targets))

    def resume(self) -> list[PromotionRequest]:
        """Finish the alias moves that a crash or an MLflow outage left undone (on every start, and every
        promotion_sweep_s in a running bot: bot/web/lease_sweeper.py)."""
        return [self._apply(request_id) for request_id in self.store.outbox(self.clock())]

    def _check(self, policy: TargetPolicy, model: str, version: int, *, beats: bool) -> None:
        found = self.registry.version(model, version)
        if found.run_id and found.run_status != FINISHED_RUN:
            raise BadRequest(
                f"{model} v{version}: its run {found.run_id} is {found.run_status}; promote it once the run finished"
            )
        for check in policy.checks:
            value = found.metrics.get(check.metric)
            if value is None:
                raise BadRequest(f"{model} v{version}: its run logged no {check.metric}, which {policy.name} checks")
            if not check.holds(value):
                raise BadRequest(f"{model} v{version}: {check.metric} is {value:g}; {policy.name} needs {check}")
        holder = self.registry.alias_holder(model, policy.name)
        if holder == version:
            raise BadRequest(f"{model}@{policy.name} already is v{version}")
        # A rollback returns to a version that lost to the one it replaces: only promotions must beat it.
        if beats and policy.beats_current and holder is not None:
            self._beats(policy.beats_current, policy.name, found.metrics, model, holder)

    def _beats(self, rule: BeatsCurrent, target: str, metrics: dict[str, float], model: str, holder: int) -> None:
        ours, theirs = metrics.get(rule.metric), self.registry.version(model, holder).metrics.get(rule.metric)
        if ours is None:
            raise BadRequest(f"{model}: the candidate logged no {rule.metric}, which must beat v{holder}'s")
        if theirs is not None and not rule.better(ours, theirs):
            raise BadRequest(
                f"{model}: {rule.metric} {ours:g} does not beat v{holder}'s {theirs:g} ({rule.mode}) on {target}"
            )

    def _named(self, actor: Actor) -> Actor:
        """The actor under the name trainbot records them by (a Slack id becomes the name it stands for)."""
        return Actor(self.people.name(actor.user), actor.groups)

    def _policy(self, target: str) -> TargetPolicy:
        """The target's policy with its requesters and approvers as names, however the config spelled them."""
        policy = target_policy(self.targets, target)
        names = self.people.names
        return replace(policy, requesters=names(policy.requesters), approvers=names(policy.approvers))

    def _approver_check(self, actor: Actor) -> Callable[[PromotionRequest], None]:
        def allowed(request: PromotionRequest) -> None:
            self._policy(request.target).check_approver(actor, request.requester)

        return allowed

    def _apply(self, request_id: str) -> PromotionRequest:
        """Move the alias if this process wins the claim; whoever holds it finishes the request."""
        if not self.store.claim_apply(request_id, self.clock(), self.apply_lease):
            return self.store.get(request_id)
        return self._move(request_id)

    def _move(self, request_id: str) -> PromotionRequest:
        """Move the alias of a request whose move this process holds."""
        request = self.store.get(request_id)
        try:
            holder = self.registry.alias_holder(request.model, request.target)
            self.store.begin_move(request_id, holder, self.clock())
            # A re-apply after a crash finds the move done; moving again would announce it twice.
            if holder != request.version:
                self.registry.move_alias(request.model, request.target, request.version)
        except ActionError as error:
            failed = self.store.fail_apply(request_id, str(error), self.clock())
            if not isinstance(error, Unavailable):  # an MLflow that failed the move would fail its tags too
                self._mirror(failed)
            return failed
        done = self.store.finish_apply(request_id, self.clock())
        self._mirror(done)
        return done

    def _mirror(self, request: PromotionRequest) -> None:
        """Copy the request's state into the version's tags; the store stays the record if MLflow fails."""
        prefix = f"trainbot.{request.target}"
        tags = {
            f"{prefix}.request": request.id,
            f"{prefix}.state": request.state.value,
            f"{prefix}.requested_by": request.requester,
            f"{prefix}.approved_by": ",".join(request.approvals),
            f"{prefix}.at": request.updated_at.isoformat(timespec="seconds"),
        }
        try:
            self.registry.tag(request.model, request.version, tags)
        except ActionError as error:
            log.warning("could not mirror %s (%s) into MLflow tags: %s", request.id, request.state.value, error)


def holders_before(moves: list[PromotionRequest]) -> list[int]:
    """The versions a target named, oldest first, as a stack: a promotion pushes, an approved rollback pops.

    So a second rollback goes one further back rather than undoing the first. A version the alias named
    before a move that trainbot did not make (set by hand) is kept beneath the move that replaced it.
    """
    stack: list[int] = []
    for move in moves:
        if move.kind == ROLLBACK and len(stack) >= 2 and stack[-2] == move.version:
            stack.pop()
            continue
        if move.previous_version is not None and (not stack or stack[-1] != move.previous_version):
            stack.append(move.previous_version)
        stack.append(move.version)
    return stack
