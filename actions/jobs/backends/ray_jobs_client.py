"""Ray's JobSubmissionClient with a (connect, read) timeout on every request.

Ray's own sends its requests with none, so a dashboard that accepts the connection and never answers
held `trainbot status` and every launch forever. Imported only where the local backend needs Ray.
"""

from __future__ import annotations

from typing import Any

import requests
from ray.job_submission import JobSubmissionClient


class TimedJobSubmissionClient(JobSubmissionClient):
    def __init__(self, address: str, timeout: tuple[float, float]) -> None:
        # Set before Ray's constructor, whose version check is the first request.
        self._request_timeout = timeout
        super().__init__(address)

    def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> requests.Response:
        # Ray forwards keyword arguments to requests.request (without retries: requests makes none).
        return super()._do_request(method, endpoint, **{"timeout": self._request_timeout, **kwargs})

    def get(self, endpoint: str) -> requests.Response:
        """GET another endpoint of the same dashboard (Ray's state API), with the same timeout."""
        return self._do_request("GET", endpoint)
