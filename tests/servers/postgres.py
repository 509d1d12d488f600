"""A private PostgreSQL cluster for a test session: Debian's server binaries, a temp dir, a free loopback port.

The server refuses to run as root, so as root (CI, the developers' machines) initdb and pg_ctl run as the
`postgres` system user that Debian's package creates; otherwise as the current user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tests.servers.processes import free_port

SUPERUSER = "trainbot"
START_TIMEOUT_S = 60
POSTGRES_USER = "postgres"


def server_bin_dir() -> Path | None:
    """Where Debian's PostgreSQL server binaries are (the newest major), or None when it is not installed."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    majors = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda path: int(path.parent.parent.name))
    return majors[-1].parent if majors else None


def _as_server_user(command: Sequence[str]) -> list[str]:
    if os.geteuid() != 0:
        return list(command)
    return ["runuser", "-u", POSTGRES_USER, "--", *command]


@contextmanager
def private_cluster(bin_dir: Path) -> Iterator[str]:
    """A fresh cluster listening on 127.0.0.1 only; yields the server URL (no database) with trust auth."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="tb-pg-") as scratch:
        root = Path(scratch)
        data, sockets, log = root / "data", root / "sockets", root / "server.log"
        sockets.mkdir()
        if os.geteuid() == 0:
            server_user = pwd.getpwnam(POSTGRES_USER)
            for path in (root, sockets):
                os.chown(path, server_user.pw_uid, server_user.pw_gid)
        subprocess.run(
            _as_server_user(
                [str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync"]
            ),
            check=True,
            capture_output=True,
            timeout=START_TIMEOUT_S,
        )
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c fsync=off -c max_connections=200"
        start = [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start"]
        subprocess.run(_as_server_user(start), check=True, capture_output=True, timeout=START_TIMEOUT_S + 10)
        try:
            yield f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{port}"
        finally:
            stop = [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]
            subprocess.run(_as_server_user(stop), check=False, capture_output=True, timeout=START_TIMEOUT_S)


def create_database(server_url: str) -> str:
    """A new empty database on the cluster; its URL."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    libpq_url = server_url.replace("postgresql+psycopg://", "postgresql://") + "/postgres"
    with psycopg.connect(libpq_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server_url}/{name}"
