"""A server that accepts every connection and never answers: the outage that hangs a client without timeouts.

A closed port fails at once; this one lets the connection open and then says nothing, as a wedged MLflow,
PostgreSQL, API server or dashboard does. Connections are held until the block ends.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

HOST = "127.0.0.1"


@contextmanager
def silent_server() -> Iterator[int]:
    """The port of a listener on 127.0.0.1 that accepts and never replies, until the block ends."""
    listener = socket.socket()
    listener.bind((HOST, 0))
    listener.listen(64)
    # accept() wakes this often to see whether the block ended.
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    ended = threading.Event()

    def accept_until_ended() -> None:
        while not ended.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(connection)

    thread = threading.Thread(target=accept_until_ended, name="silent-server", daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        ended.set()
        thread.join(timeout=5)
        listener.close()
        for connection in held:
            connection.close()
