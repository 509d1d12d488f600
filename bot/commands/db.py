"""`trainbot db upgrade | current`: the state store's schema revision (the bot upgrades it on start too)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from bot.commands.jobs import add_output_option, print_document
from bot.services import Services

if TYPE_CHECKING:
    from actions.state.database import Database


def add_db_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    db = commands.add_parser("db", help="the state store's schema: its revision, and upgrading it")
    actions = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    upgrade = actions.add_parser("upgrade", help="bring the schema to the newest revision (the bot does on start)")
    add_output_option(upgrade)
    upgrade.set_defaults(handler=_upgrade)
    current = actions.add_parser("current", help="the revision the state store is at, and the newest one")
    add_output_option(current)
    current.set_defaults(handler=_current)


def _upgrade(args: argparse.Namespace) -> int:
    from actions.state.migrations import upgrade  # noqa: PLC0415 - SQLAlchemy and Alembic load only when used

    done = upgrade(_database().engine)
    if done.stamped:
        text = f"recognised {done.previous} from its tables (made before versioning); now at {done.current}"
    elif done.previous == done.current:
        text = f"already at {done.current}"
    else:
        text = f"upgraded from {done.previous or 'an empty database'} to {done.current}"
    print_document(done.to_dict(), args.output, text)
    return 0


def _current(args: argparse.Namespace) -> int:
    from actions.state.migrations import revisions  # noqa: PLC0415

    found = revisions(_database().engine)
    print_document(found.to_dict(), args.output, f"current: {found.current or 'none'}\nhead: {found.head}")
    return 0


def _database() -> Database:
    from actions.settings import load_settings  # noqa: PLC0415

    return Services(load_settings()).database
