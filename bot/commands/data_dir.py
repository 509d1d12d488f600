"""`trainbot config` and `trainbot stop`: the settings in use (with the data directory chosen and why), and
stopping the local Ray head that belongs to that data directory."""

from __future__ import annotations

import argparse
import json


def add_data_dir_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    config = commands.add_parser("config", help="print the effective settings and which data directory, and why")
    config.set_defaults(handler=_config)
    stop = commands.add_parser(
        "stop", help="stop this data directory's local Ray head and its jobs (no other head on the machine)"
    )
    stop.set_defaults(handler=_stop)


def _config(args: argparse.Namespace) -> int:
    from actions.settings import load_settings  # noqa: PLC0415 - pydantic loads only for the verbs that need it

    print(json.dumps(load_settings().shown(), indent=2))
    return 0


def _stop(args: argparse.Namespace) -> int:
    from actions.jobs.backends.local_head import stop_head  # noqa: PLC0415 - psutil loads only here
    from actions.settings import load_settings  # noqa: PLC0415

    settings = load_settings()
    stopped = stop_head(settings)
    if stopped:
        print(f"stopped the local Ray head of {settings.data_dir} ({stopped} processes, its jobs with it)")
    else:
        print(f"no local Ray head of {settings.data_dir} is running; nothing to stop")
    return 0
