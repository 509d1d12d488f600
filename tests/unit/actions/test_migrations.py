"""The state store's schema revisions on sqlite and PostgreSQL: databases made before versioning (by
create_all, one Database at a time) are recognised and upgraded with their rows, fresh ones get head,
processes starting together migrate once, and the revisions make exactly what the models define."""

import multiprocessing
import os
import subprocess
from datetime import UTC, datetime, timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Column, ForeignKey, Integer, MetaData, String, Table, Text, create_engine, insert, text

import actions.state.migrations
from actions.alerts.threads import AlertThreads
from actions.jobs.job import JobState
from actions.jobs.records import Store
from actions.promotions.deliveries import Delivery
from actions.promotions.registry_events import RegistryEvents
from actions.promotions.store import PromotionState, PromotionStore
from actions.settings import SettingsError
from actions.state import tables
from actions.state.database import Database, UTCDateTime
from actions.state.migrations import VERSION_TABLE, Revisions, Upgrade, head, revisions, upgrade
from actions.state.migrations.runner import locked
from actions.state.posts import SlackPosts
from tests.paths import TRAINBOT

AT = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def baseline_promotion_tables() -> MetaData:
    """promotion_store.py's tables as trainbot made them before MLflow's webhooks (commit 54116ec)."""
    legacy = MetaData()
    Table(
        "promotion_requests",
        legacy,
        Column("id", String(32), primary_key=True),
        Column("model", String(256), nullable=False, index=True),
        Column("version", Integer, nullable=False),
        Column("target", String(256), nullable=False),
        Column("kind", String(16), nullable=False),
        Column("requester", String(128), nullable=False),
        Column("state", String(16), nullable=False, index=True),
        Column("approvals_needed", Integer, nullable=False),
        Column("reason", Text),
        Column("previous_version", Integer),
        Column("move_started_at", UTCDateTime()),
        Column("open_key", String(600), unique=True),
        Column("lease_until", UTCDateTime()),
        Column("created_at", UTCDateTime(), nullable=False),
        Column("expires_at", UTCDateTime(), nullable=False),
        Column("updated_at", UTCDateTime(), nullable=False),
    )
    Table(
        "promotion_approvals",
        legacy,
        Column("request_id", String(32), ForeignKey("promotion_requests.id"), primary_key=True),
        Column("approver", String(128), primary_key=True),
        Column("at", UTCDateTime(), nullable=False),
    )
    Table(
        "promotion_events",
        legacy,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("request_id", String(32), nullable=False, index=True),
        Column("model", String(256), nullable=False, index=True),
        Column("target", String(256), nullable=False),
        Column("version", Integer, nullable=False),
        Column("event", String(32), nullable=False),
        Column("actor", String(128), nullable=False),
        Column("at", UTCDateTime(), nullable=False),
        Column("detail", Text),
    )
    return legacy


BASELINE = baseline_promotion_tables()
SCRIPTS = ScriptDirectory(str(actions.state.migrations.VERSIONS.parent))
HEAD = head()
STORE_TABLES = ("job_events", "jobs", "cursors")
PROMOTION_TABLES = ("promotion_approvals", "promotion_events", "promotion_requests")
NEWER_TABLES = ("0003_mlflow_webhooks", "0004_slack_posts", "0005_slack_shown", "0006_alert_threads")


def dropped(*tables: str):
    def drop(conn) -> None:
        for table in tables:
            conn.execute(text(f"DROP TABLE {table}"))

    return drop


# How databases were made before versioning, step by step: create_all of the promotion tables as commit
# 54116ec defined them; the tables a revision makes (what that day's create_all made: its upgrade() alone,
# no version kept); or tables dropped (made by a trainbot that never opened that Database).
LEGACY_DATABASES = {
    "baseline": ([BASELINE, "0001_baseline"], "0001_baseline"),
    # Made at the baseline; a later trainbot's create_all added the tables it lacked, and no column.
    "baseline then newer tables": ([BASELINE, "0001_baseline", *NEWER_TABLES], "0001_baseline"),
    "everything before versioning": (["0001_baseline", "0002_announced_at", *NEWER_TABLES], "0006_alert_threads"),
    # Only the CLI's job commands ran: no revision is there in full.
    "jobs tables only": (["0001_baseline", dropped(*PROMOTION_TABLES)], None),
    # Only the promotion stores ran, after webhooks: announced_at is there, the baseline is not in full.
    "promotion tables only": (
        ["0001_baseline", "0002_announced_at", "0003_mlflow_webhooks", dropped(*STORE_TABLES)],
        None,
    ),
}


def make_legacy(url: str, steps: list) -> set[str]:
    """A database made as `steps` say, with a job and an approved, moved promotion where it has their tables;
    which of the two it holds."""
    engine = create_engine(url)
    with engine.begin() as conn:
        with Operations.context(MigrationContext.configure(conn)):
            for step in steps:
                if isinstance(step, MetaData):
                    step.create_all(conn)
                elif isinstance(step, str):
                    SCRIPTS.get_revision(step).module.upgrade()
                else:
                    step(conn)
        held = _insert_rows(conn)
    engine.dispose()
    return held


def _insert_rows(conn) -> set[str]:
    """Rows written through the tables as they are (reflected), never through today's models."""
    tables = MetaData()
    tables.reflect(conn)
    held = set()
    status = dict.fromkeys(("reason", "deployment_status", "dashboard_url", "cluster_name", "submission_id"), "")
    if "jobs" in tables.tables:
        conn.execute(
            insert(tables.tables["jobs"]).values(
                name="train-a", backend="local", kind="train", template="tiny-transformer", requester="alice",
                params={"lr": 0.001}, workers=2, gpus_per_worker=1, entrypoint="python -m train", created_at=AT,
                updated_at=AT, state="RUNNING", message="started", **status,
            )
        )  # fmt: skip
        for state, message in (("PENDING", ""), ("RUNNING", "started")):
            conn.execute(
                insert(tables.tables["job_events"]).values(
                    job_name="train-a", at=AT, state=state, message=message, **status
                )
            )
        held.add("jobs")
    if "promotion_requests" in tables.tables:
        conn.execute(
            insert(tables.tables["promotion_requests"]).values(
                id="pr-1", model="m", version=3, target="staging", kind="promote", requester="alice",
                state=PromotionState.APPROVED.value, approvals_needed=1, move_started_at=AT,
                created_at=AT, expires_at=AT + timedelta(days=1), updated_at=AT,
            )
        )  # fmt: skip
        conn.execute(insert(tables.tables["promotion_approvals"]).values(request_id="pr-1", approver="bob", at=AT))
        conn.execute(
            insert(tables.tables["promotion_events"]).values(
                request_id="pr-1", model="m", target="staging", version=3, event="approved", actor="bob", at=AT
            )
        )
        held.add("promotions")
    return held


def assert_rows_kept(url: str, held: set[str]) -> None:
    jobs = Store(url)
    if "jobs" in held:
        assert jobs.get("train-a").state is JobState.RUNNING
        assert [event.state for event in jobs.history("train-a")] == [JobState.PENDING, JobState.RUNNING]
    jobs.close()
    if "promotions" not in held:
        return
    promotions = PromotionStore(url)
    request = promotions.get("pr-1")
    assert (request.state, request.approvals, request.announced_at) == (PromotionState.APPROVED, ("bob",), None)
    # The baseline lacked both: the announcement is claimed in announced_at, and an out-of-band change
    # is an audit-trail line with no request and no version.
    events = RegistryEvents(url)
    moved = Delivery("d-1", "model_version_alias.created", {"name": "m", "alias": "staging", "version": "3"}, AT)
    assert events.receive(moved, AT, ["staging"]).notices == ()
    assert promotions.get("pr-1").announced_at == AT
    deleted = Delivery("d-2", "model_version_alias.deleted", {"name": "m", "alias": "staging"}, AT)
    assert len(events.receive(deleted, AT, ["staging"]).notices) == 1
    trail = promotions.history("m")
    assert [(line.event, line.request_id, line.version) for line in trail] == [
        ("approved", "pr-1", 3),
        ("out-of-band", None, None),
    ]
    events.close()
    promotions.close()


@pytest.mark.parametrize("made", LEGACY_DATABASES)
def test_a_database_made_before_versioning_is_stamped_and_upgraded_with_its_rows(state_store_url, made):
    steps, shown = LEGACY_DATABASES[made]
    held = make_legacy(state_store_url, steps)
    database = Database(state_store_url)
    assert revisions(database.engine) == Revisions(None, HEAD)
    assert upgrade(database.engine) == Upgrade(shown, HEAD, stamped=shown is not None)
    assert revisions(database.engine) == Revisions(HEAD, HEAD)
    assert upgrade(database.engine) == Upgrade(HEAD, HEAD)
    database.close()
    assert_rows_kept(state_store_url, held)


def test_each_revision_file_is_named_after_its_revision_in_the_order_of_the_chain():
    chain = [script.revision for script in reversed(list(SCRIPTS.walk_revisions()))]
    files = sorted(path.stem for path in actions.state.migrations.VERSIONS.glob("*.py") if path.stem != "__init__")
    assert chain == files
    assert chain[-1] == HEAD == SCRIPTS.get_current_head()


def test_a_fresh_database_gets_head(state_store_url):
    database = Database(state_store_url)
    assert upgrade(database.engine) == Upgrade(None, HEAD)
    assert revisions(database.engine) == Revisions(HEAD, HEAD)
    database.close()


@pytest.mark.parametrize("made", [None, "baseline then newer tables"])
def test_the_migrated_schema_is_exactly_what_the_models_define(state_store_url, made):
    if made:
        make_legacy(state_store_url, LEGACY_DATABASES[made][0])
    database = Database(state_store_url)
    upgrade(database.engine)
    models = tables.metadata
    assert {"jobs", "promotion_notices", "slack_shown", "alert_threads"} <= set(models.tables)
    with database.engine.connect() as conn:
        differences = compare_metadata(MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}), models)
    database.close()
    # A column or table added to a model without a revision shows here: add one (docs/development.md).
    assert differences == []


def _start(url: str, barrier) -> None:
    """What the bot does on start: each of its stores opens the database and asks for the schema."""
    databases = [database(url) for database in (Store, PromotionStore, SlackPosts, AlertThreads)]
    barrier.wait(timeout=60)
    for database in databases:
        database.create_schema()


@pytest.mark.parametrize("made", [None, "baseline then newer tables"])
def test_processes_upgrading_at_once_all_succeed_and_migrate_once(state_store_url, made):
    held = make_legacy(state_store_url, LEGACY_DATABASES[made][0]) if made else set()
    # The bot, the CLI and a second replica starting on the same database at the same moment. Spawned, not
    # forked: a fork copies locks that the suite's other threads hold, and a child waited on one forever.
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    processes = [context.Process(target=_start, args=(state_store_url, barrier)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
    assert [process.exitcode for process in processes] == [0, 0, 0, 0]
    database = Database(state_store_url)
    assert revisions(database.engine) == Revisions(HEAD, HEAD)
    with database.engine.connect() as conn:
        assert conn.scalar(text(f"SELECT count(*) FROM {VERSION_TABLE}")) == 1
    database.close()
    assert_rows_kept(state_store_url, held)


def test_sqlite_batch_mode_copying_jobs_keeps_its_events_and_foreign_keys_stay_on(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    make_legacy(url, LEGACY_DATABASES["jobs tables only"][0])
    database = Database(url)
    upgrade(database.engine)
    # What a revision that alters a jobs column does on sqlite: copy the table, drop the old one, rename.
    with (
        locked(database.engine) as conn,
        Operations(MigrationContext.configure(conn)).batch_alter_table("jobs", recreate="always"),
    ):
        pass
    with database.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    database.close()
    assert len(Store(url).history("train-a")) == 2


def _stamp_future(url: str) -> None:
    database = Database(url)
    upgrade(database.engine)
    with database.engine.begin() as conn:
        conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '0099_future'"))
    database.close()


def test_a_database_a_newer_trainbot_upgraded_is_refused_with_what_to_do(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _stamp_future(url)
    with pytest.raises(SettingsError, match="revision 0099_future, which this trainbot does not have"):
        Store(url).create_schema()


def trainbot(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TRAINBOT_")}
    env = {**clean, "TRAINBOT_STATE_STORE_URL": url}
    return subprocess.run([str(TRAINBOT), *args], capture_output=True, text=True, timeout=120, env=env, check=False)


def test_trainbot_db_current_and_upgrade(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    make_legacy(url, LEGACY_DATABASES["baseline"][0])
    assert trainbot(url, "db", "current").stdout == f"current: none\nhead: {HEAD}\n"
    upgraded = trainbot(url, "db", "upgrade")
    assert upgraded.stdout == f"recognised 0001_baseline from its tables (made before versioning); now at {HEAD}\n"
    assert trainbot(url, "db", "upgrade").stdout == f"already at {HEAD}\n"
    current = trainbot(url, "db", "current", "-o", "json")
    assert (current.returncode, current.stdout) == (0, f'{{\n  "current": "{HEAD}",\n  "head": "{HEAD}"\n}}\n')


def test_trainbot_db_upgrade_on_a_newer_database_says_what_to_do_in_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _stamp_future(url)
    assert trainbot(url, "db", "current").stdout == f"current: 0099_future\nhead: {HEAD}\n"
    refused = trainbot(url, "db", "upgrade")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "run that version or newer" in refused.stderr
