"""Errors a person can cause, in one hierarchy under ActionError. Each message says what to do; the CLI, Slack and
the web server show it as it is."""

from __future__ import annotations

# What trainbot writes (state, logs, kept bundles, incident reports) is its user's alone. Here rather than in
# actions.settings so that `trainbot diagnose` starts without loading pydantic.
PRIVATE_UMASK = 0o077


class ActionError(Exception):
    """Something the person asking can fix: the message names the thing and the fix. The root of every error
    trainbot shows as it is; anything else is an incident."""


class SettingsError(ActionError, ValueError):
    """The configuration cannot be used; the message says which file or variable to fix. A ValueError too, so
    pydantic's validators report it as a validation error."""


class BadRequest(ActionError):
    """The request itself is wrong: an unknown template, a bad parameter, a malformed manifest."""


class NotFound(ActionError):
    """The job, template or model named does not exist (or is no longer known)."""


class Conflict(ActionError):
    """The name is taken or the object changed underneath us; trying again usually works."""


class Forbidden(ActionError):
    """The requester may not do this; the message says who may."""


class Unavailable(ActionError):
    """A backend (Ray, Kubernetes, MLflow) cannot be reached or refused to answer."""


class Unauthorized(ActionError):
    """The caller did not prove who it is: a missing or wrong signature, or one too old."""
