"""`trainbot`: the command line. Each subcommand parses, calls one function, renders.

Imports stay lazy so `trainbot diagnose` starts fast (it loads neither pydantic nor the other commands' modules)
and the bot's path never loads torch.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from actions.errors import PRIVATE_UMASK, ActionError, BadRequest, SettingsError
from bot.commands.diagnose import add_diagnose_command

EXIT_USAGE = 2


def _serve(args: argparse.Namespace) -> int:
    import logging  # noqa: PLC0415

    from actions.settings import load_settings  # noqa: PLC0415
    from bot.http.server import Limits  # noqa: PLC0415
    from bot.services import Services  # noqa: PLC0415
    from bot.web.app import serve_everything  # noqa: PLC0415

    settings = load_settings()
    settings.private_data_dir()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    chosen = {"read_timeout_s": args.read_timeout, "grace_s": args.grace}
    limits = Limits(**{name: value for name, value in chosen.items() if value is not None})
    try:
        undone = serve_everything(Services(settings), args.host, args.port, limits, socket_mode=args.socket_mode)
    except OSError as error:
        raise BadRequest(f"cannot serve on {args.host}:{args.port} ({error.strerror}); pick another --port") from None
    if undone:
        # The pool's threads would hold the interpreter's exit until their work ends, past the grace.
        logging.shutdown()
        os._exit(1)
    return 0


def _console(args: argparse.Namespace) -> int:
    from actions.settings import load_settings  # noqa: PLC0415
    from bot.console.terminal import run_console, script_lines  # noqa: PLC0415 - Bolt and the bot load only here

    lines = script_lines(args.script) if args.script else None
    return run_console(load_settings(), args.user, lines)


def build_parser(only_diagnose: bool = False) -> argparse.ArgumentParser:
    """The whole command line; with only_diagnose, just `diagnose` (which needs none of the others' modules)."""
    parser = argparse.ArgumentParser(prog="trainbot", description="Chat-ops for GPU training on Ray.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_diagnose_command(commands)
    if only_diagnose:
        return parser
    from bot.commands.data_dir import add_data_dir_commands  # noqa: PLC0415
    from bot.commands.db import add_db_commands  # noqa: PLC0415
    from bot.commands.jobs import add_job_commands  # noqa: PLC0415
    from bot.commands.models import add_model_commands  # noqa: PLC0415
    from bot.commands.scale import add_scale_commands  # noqa: PLC0415

    add_data_dir_commands(commands)
    serve = commands.add_parser("serve", help="serve trainbot's HTTP endpoints (Slack, MLflow webhooks, /healthz)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0 for all)")
    serve.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    serve.add_argument(
        "--socket-mode",
        action="store_true",
        help="take Slack over Socket Mode (SLACK_BOT_TOKEN and SLACK_APP_TOKEN, no public URL); HTTP serves the rest",
    )
    serve.add_argument(
        "--grace",
        type=float,
        metavar="SECONDS",
        help="on SIGTERM, how long to answer what was read and finish acked work (default: 25); "
        "below the pod's terminationGracePeriodSeconds",
    )
    serve.add_argument(
        "--read-timeout",
        type=int,
        metavar="SECONDS",
        help="close a connection silent this long, mid-request too (default: 10)",
    )
    serve.set_defaults(handler=_serve)
    console = commands.add_parser("console", help="Slack in this terminal: the bot on embedded defaults")
    console.add_argument("--as", dest="user", default=_console_user(), help="who is typing (default: you)")
    console.add_argument("--script", type=Path, metavar="FILE", help="run these lines, echoed, then leave")
    console.set_defaults(handler=_console)
    add_job_commands(commands)
    add_scale_commands(commands)
    add_model_commands(commands)
    add_db_commands(commands)
    return parser


def _console_user() -> str:
    import getpass  # noqa: PLC0415

    name = re.sub(r"[^A-Za-z0-9]", "", getpass.getuser())
    return name if len(name) >= 2 else "you"


def main(argv: Sequence[str] | None = None) -> int:
    # Files trainbot (and the Ray head it starts) creates are 0600 and folders 0700: the state store,
    # logs, kept bundles and incident reports hold job logs and credentials' neighbours.
    os.umask(PRIVATE_UMASK)
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == ["diagnose"]:
        args = build_parser(only_diagnose=True).parse_args(words)
    else:
        from bot.commands.jobs import parse_job_words  # noqa: PLC0415

        args = parse_job_words(build_parser(), words)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except ActionError as error:
        print(f"trainbot: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception:
        return _unexpected(args.command)


def _unexpected(command: str) -> int:
    """Keep the traceback in an incident report (0600: main's umask) and show its id, never the traceback itself."""
    from bot.incidents import record_incident  # noqa: PLC0415

    incident = record_incident(f"trainbot {command}", report_dir=_incident_dir().resolve())
    print(
        f"trainbot: unexpected error, incident {incident.id}; details in {incident.report}. Please report it.",
        file=sys.stderr,
    )
    return 1


def _incident_dir() -> Path:
    """<data dir>/incidents; a private temporary folder where the settings cannot say which data dir."""
    import tempfile  # noqa: PLC0415

    from actions.settings import load_settings  # noqa: PLC0415

    try:
        folder = load_settings().private_data_dir() / "incidents"
        folder.mkdir(mode=0o700, exist_ok=True)
        return folder
    except (SettingsError, OSError):
        return Path(tempfile.mkdtemp(prefix="trainbot-incident-"))


if __name__ == "__main__":
    sys.exit(main())
