"""Registry events from MLflow's webhooks, on a real state store (sqlite and PostgreSQL): which alias changes trainbot's
requests explain, which are out-of-band, and each delivery handled once."""

from datetime import UTC, datetime, timedelta

import pytest

from actions.errors import BadRequest
from actions.promotions.deliveries import Delivery
from actions.promotions.registry_events import NoticeKind, RegistryEvents
from actions.promotions.store import PromotionRequest, PromotionStore

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
TARGETS = ["staging", "production"]


@pytest.fixture
def url(state_store_url: str) -> str:
    PromotionStore(state_store_url).create_schema()
    return state_store_url


@pytest.fixture
def store(url: str) -> PromotionStore:
    return PromotionStore(url)


@pytest.fixture
def registry_events(url: str) -> RegistryEvents:
    return RegistryEvents(url)


def moved(store: PromotionStore, version: int, at: datetime = NOW, model: str = "m") -> PromotionRequest:
    """A request for staging, approved and its alias move done, as Promotions leaves it."""
    request = store.create(
        model=model,
        version=version,
        target="staging",
        kind="promote",
        requester="U01ALICE",
        approvals_needed=1,
        expires_in=timedelta(hours=24),
        at=at,
    )
    store.approve(request.id, "U02B", at, lambda _: None)
    assert store.claim_apply(request.id, at, timedelta(minutes=2))
    store.begin_move(request.id, None, at)
    return store.finish_apply(request.id, at)


counter = iter(range(1_000_000))


def delivery(event: str, **data: str) -> Delivery:
    return Delivery(f"delivery-{next(counter)}", event, data, NOW)


def alias_set(version: int, alias: str = "staging", model: str = "m") -> Delivery:
    return delivery("model_version_alias.created", name=model, alias=alias, version=str(version))


def kinds(receipt) -> list[NoticeKind]:
    return [notice.kind for notice in receipt.notices]


def test_a_new_version_raises_an_offer_with_a_quoted_command(registry_events):
    receipt = registry_events.receive(
        delivery("model_version.created", name="team a; rm -rf /", version="4", run_id="abc123"), NOW, TARGETS
    )
    [offer] = receipt.notices
    assert offer.kind == NoticeKind.OFFER
    assert offer.text == (
        "team a; rm -rf / v4 was registered from run abc123. To promote it (staging, production): "
        "trainbot model promote 'team a; rm -rf /' 4 staging"
    )
    assert registry_events.unposted() == [offer]


def test_the_move_of_an_approved_request_is_explained_once(store, registry_events):
    request = moved(store, 2)
    assert kinds(registry_events.receive(alias_set(2), NOW, TARGETS)) == []
    assert store.get(request.id).state.value == "approved"
    # The same change announced again (a second, different delivery) has no request left to explain it.
    assert kinds(registry_events.receive(alias_set(2), NOW, TARGETS)) == [NoticeKind.OUT_OF_BAND]


def test_a_change_no_request_explains_is_out_of_band_and_in_the_history(store, registry_events):
    moved(store, 2)
    receipt = registry_events.receive(alias_set(1), NOW, TARGETS)
    [notice] = receipt.notices
    assert (notice.kind, notice.model, notice.alias, notice.version) == (NoticeKind.OUT_OF_BAND, "m", "staging", 1)
    assert notice.text == (
        "m@staging now names v1, and no approved trainbot request moved it there. "
        "`trainbot model history m` shows the approved moves."
    )
    [event] = [event for event in store.history("m") if event.event == "out-of-band"]
    assert (event.request_id, event.actor, event.version, event.target) == (None, "mlflow", 1, "staging")


def test_an_older_request_does_not_explain_a_move_back_to_its_version(store, registry_events):
    moved(store, 2, NOW - timedelta(days=7))  # never announced: webhooks came later
    moved(store, 3, NOW - timedelta(days=1))
    assert kinds(registry_events.receive(alias_set(3), NOW, TARGETS)) == []
    assert kinds(registry_events.receive(alias_set(2), NOW, TARGETS)) == [NoticeKind.OUT_OF_BAND]


def test_other_models_and_aliases_are_not_explained_by_this_request(store, registry_events):
    moved(store, 2)
    assert kinds(registry_events.receive(alias_set(2, alias="production"), NOW, TARGETS)) == [NoticeKind.OUT_OF_BAND]
    assert kinds(registry_events.receive(alias_set(2, model="other"), NOW, TARGETS)) == [NoticeKind.OUT_OF_BAND]
    assert kinds(registry_events.receive(alias_set(2), NOW, TARGETS)) == []


def test_a_deleted_alias_is_always_out_of_band(store, registry_events):
    moved(store, 2)
    receipt = registry_events.receive(delivery("model_version_alias.deleted", name="m", alias="staging"), NOW, TARGETS)
    assert [(notice.kind, notice.version) for notice in receipt.notices] == [(NoticeKind.OUT_OF_BAND, None)]
    assert "m@staging was deleted, outside trainbot" in receipt.notices[0].text


def test_a_delivery_is_handled_once(registry_events):
    first = delivery("model_version.created", name="m", version="5")
    assert len(registry_events.receive(first, NOW, TARGETS).notices) == 1
    again = registry_events.receive(first, NOW, TARGETS)
    assert (again.duplicate, again.notices) == (True, ())
    assert len(registry_events.unposted()) == 1


def test_events_trainbot_does_not_act_on_raise_nothing(registry_events):
    receipt = registry_events.receive(delivery("registered_model.created", name="m"), NOW, TARGETS)
    assert (receipt.duplicate, receipt.notices) == (False, ())


def test_bad_data_is_refused_and_the_delivery_stays_unseen(registry_events):
    broken = Delivery("delivery-broken", "model_version_alias.created", {"name": "m", "alias": "staging"}, NOW)
    with pytest.raises(BadRequest, match=r"data\.version None is not a version number"):
        registry_events.receive(broken, NOW, TARGETS)
    fixed = Delivery("delivery-broken", "model_version_alias.created", {"name": "m", "alias": "a", "version": "1"}, NOW)
    assert registry_events.receive(fixed, NOW, TARGETS).duplicate is False


def test_a_notice_is_marked_posted_by_one_poster(registry_events):
    [notice] = registry_events.receive(delivery("model_version.created", name="m", version="1"), NOW, TARGETS).notices
    assert registry_events.mark_posted(notice.id, NOW)
    assert not registry_events.mark_posted(notice.id, NOW)
    assert registry_events.unposted() == []
