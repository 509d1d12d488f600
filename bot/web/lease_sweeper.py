"""The running bot finishes alias moves whose holder died (kill -9, a lost node) once their lease runs out,
instead of leaving the request `approving` until the next CLI command or restart.

Every `trainbot serve` sweeps; the store's claim lets exactly one of them move the alias.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from actions.errors import ActionError

if TYPE_CHECKING:
    from actions.promotions.service import Promotions

log = logging.getLogger(__name__)


def start_lease_sweeper(promotions: Promotions, every_s: float) -> threading.Event:
    """A daemon thread calling `promotions.resume()` every `every_s`; set the returned event to stop it."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            try:
                for request in promotions.resume():
                    log.info("finished the interrupted alias move of %s: %s", request.id, request.state.value)
            except ActionError as error:
                log.warning("finishing interrupted alias moves: %s; trying again in %s s", error, every_s)
            except Exception:
                log.exception("finishing interrupted alias moves failed; trying again in %s s", every_s)

    threading.Thread(target=loop, name="lease-sweeper", daemon=True).start()
    return stop
