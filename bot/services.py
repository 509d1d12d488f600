"""Every service the bot and the CLI call, built once per process: a `Services` over the settings makes each on
first use and hands that one to every caller (the web endpoints, the Slack listeners and pollers, the console, a
CLI command). The state store's services share one engine (actions/state/database.py).

Each service's module is imported when the service is first used, so `trainbot diagnose` and the bot's start load
only what they need (no SQLAlchemy, MLflow or backend client before then).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar, overload

if TYPE_CHECKING:
    from actions.alerts.threads import AlertThreads
    from actions.evidence.bundle_shelf import BundleShelf
    from actions.jobs.service import Jobs
    from actions.jobs.studies import StudyStore
    from actions.people import People
    from actions.promotions.service import Promotions
    from actions.settings import Settings
    from actions.state.database import Database
    from actions.state.posts import SlackPosts
    from actions.state.seen_signatures import SeenSignatures

Service = TypeVar("Service")


class _BuiltOnce(Generic[Service]):
    """A service of `Services`: built by the method it decorates on first use, once however many threads ask
    together, then kept on the instance (later reads are a plain attribute)."""

    def __init__(self, build: Callable[[Services], Service]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, services: None, owner: type) -> _BuiltOnce[Service]: ...
    @overload
    def __get__(self, services: Services, owner: type | None = None) -> Service: ...
    def __get__(self, services: Services | None, owner: type | None = None) -> Service | _BuiltOnce[Service]:
        if services is None:  # asked of the class (help(), inspect): the descriptor itself
            return self
        with services.building:
            if self.name not in services.__dict__:
                services.__dict__[self.name] = self.build(services)
        return services.__dict__[self.name]


class Services:
    """The services over one set of settings; `promotions` given is used as it is (a test's own registry)."""

    def __init__(self, settings: Settings, *, promotions: Promotions | None = None) -> None:
        self.settings = settings
        self.building = threading.RLock()
        if promotions is not None:
            self.__dict__["promotions"] = promotions

    @_BuiltOnce
    def database(self) -> Database:
        """The state store itself, for its schema revision (`trainbot db`); the services below share its engine."""
        from actions.state.database import Database  # noqa: PLC0415 - SQLAlchemy loads here

        return Database(self.settings.state_url())

    @_BuiltOnce
    def people(self) -> People:
        """Who is who (the config's `people:`; the console adds its names)."""
        from actions.people import People  # noqa: PLC0415

        return People(self.settings.people)

    @_BuiltOnce
    def promotions(self) -> Promotions:
        """The promotions of the configured store and registry, with unfinished alias moves finished."""
        from actions.promotions.service import Promotions  # noqa: PLC0415 - SQLAlchemy and MLflow load here

        promotions = Promotions(self.settings, people=self.people)
        promotions.resume()
        return promotions

    @_BuiltOnce
    def jobs(self) -> Jobs:
        """The launches in the state store and the backends that run them (each made on first use)."""
        from actions.jobs.service import Jobs  # noqa: PLC0415 - SQLAlchemy loads here

        return Jobs(self.settings, people=self.people)

    @_BuiltOnce
    def studies(self) -> StudyStore:
        """The scaling studies, each with the job of each of its sizes."""
        from actions.jobs.studies import StudyStore  # noqa: PLC0415 - SQLAlchemy loads here

        studies = StudyStore(self.settings.state_url())
        studies.create_schema()
        return studies

    @_BuiltOnce
    def alert_threads(self) -> AlertThreads:
        """Alertmanager's alerts, recorded as the threads they are posted in."""
        from actions.alerts.threads import AlertThreads  # noqa: PLC0415 - SQLAlchemy loads here

        threads = AlertThreads(self.settings.state_url(), self.settings.alert_thread_labels)
        threads.create_schema()
        return threads

    @_BuiltOnce
    def slack_posts(self) -> SlackPosts:
        """Where the bot posted about something (by key), so a later change edits that message or replies under it."""
        from actions.state.posts import SlackPosts  # noqa: PLC0415 - SQLAlchemy loads here

        posts = SlackPosts(self.settings.state_url())
        posts.create_schema()
        return posts

    @_BuiltOnce
    def seen_signatures(self) -> SeenSignatures:
        """The Slack request signatures already taken, so a request sent again within its window is refused."""
        from actions.state.seen_signatures import SeenSignatures  # noqa: PLC0415 - SQLAlchemy loads here

        seen = SeenSignatures(self.settings.state_url())
        seen.create_schema()
        return seen

    @_BuiltOnce
    def bundle_shelf(self) -> BundleShelf:
        """The evidence bundles kept for the diagnoses posted in Slack."""
        from actions.evidence.bundle_shelf import BundleShelf  # noqa: PLC0415

        return BundleShelf.of(self.settings)
