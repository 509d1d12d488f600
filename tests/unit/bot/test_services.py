"""bot/services.py: each service built once per Services, on first use, whoever asks; and the state store's
services over one URL on one engine."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from actions.jobs.records import Store
from actions.promotions.service import Promotions
from actions.settings import Settings
from actions.state.posts import SlackPosts
from bot.services import Services


@pytest.fixture
def services(tmp_path: Path, state_store_url: str) -> Services:
    return Services(Settings(data_dir=tmp_path, state_store_url=state_store_url))


def test_each_service_is_built_once_and_shared(services):
    assert services.database is services.database
    assert services.jobs is services.jobs
    assert services.promotions is services.promotions
    assert services.alert_threads is services.alert_threads
    assert services.slack_posts is services.slack_posts
    assert services.seen_signatures is services.seen_signatures
    assert services.bundle_shelf.root == services.settings.data_dir / "bundles"


def test_threads_asking_at_once_get_one_service(services):
    barrier = threading.Barrier(8)
    got = []

    def ask() -> None:
        barrier.wait()
        got.append(services.jobs)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(got) == 8 and all(jobs is got[0] for jobs in got)


def test_the_state_stores_services_share_one_engine(services):
    engines = {
        id(database.engine)
        for database in (
            services.database,
            services.jobs.store,
            services.promotions.store,
            services.promotions.events,
            services.alert_threads,
            services.slack_posts,
            services.seen_signatures,
        )
    }
    assert len(engines) == 1
    url = services.settings.state_url()
    assert Store(url).engine is SlackPosts(url).engine is services.slack_posts.engine


def test_a_given_promotions_is_used_as_it_is(tmp_path, state_store_url):
    settings = Settings(data_dir=tmp_path, state_store_url=state_store_url)
    given = Promotions(settings)
    assert Services(settings, promotions=given).promotions is given


def test_services_load_nothing_heavy_until_used():
    code = (
        "import sys; import bot.services; "
        "print(sorted(m for m in ('sqlalchemy', 'mlflow', 'slack_bolt', 'kubernetes') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert loaded.stdout.strip() == "[]"
