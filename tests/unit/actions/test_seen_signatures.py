"""The replay guard's table, on sqlite and PostgreSQL: one caller wins each signature, across store instances."""

from datetime import UTC, datetime, timedelta

from actions.state.seen_signatures import SeenSignatures

NOW = datetime(2026, 11, 24, 2, 0, tzinfo=UTC)
SIGNATURE = "ab" * 32


def test_a_signature_is_first_seen_once_by_any_instance_until_it_expires(state_store_url):
    one, other = SeenSignatures(state_store_url), SeenSignatures(state_store_url)
    one.create_schema()
    window = NOW + timedelta(minutes=5)
    assert [one.first_sight(SIGNATURE, window, NOW), one.first_sight(SIGNATURE, window, NOW)] == [True, False]
    assert other.first_sight(SIGNATURE, window, NOW) is False
    # A fresh instance sweeps on its first call: past its window, the row is gone.
    assert SeenSignatures(state_store_url).first_sight(SIGNATURE, window, window + timedelta(seconds=1)) is True
