"""Who calls: one `Caller` for every way in (an API key over MCP or REST, the local user of
stdio, a person in the admin, an operator's command), passed explicitly to every service that
checks rights or records who did what (never read from a thread-local)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.base_user import AbstractBaseUser


def actor_user(user: AbstractBaseUser) -> str:
    """How a signed-in user is named in the trail."""
    return user.get_username()


# How an OAuth caller is named: "oauth:<user> via <client>". A username holds no space (Django's
# validator), so the user is what comes before the first OAUTH_CLIENT_SEPARATOR.
OAUTH_ACTOR_PREFIX = "oauth:"
OAUTH_CLIENT_SEPARATOR = " via "
# The longest actor a run records (Run.caller).
ACTOR_CHARACTERS = 200


def actor_oauth(username: str, client_name: str) -> str:
    """How a client connected with OAuth, acting for `username`, is named in the trail and
    in the runs it starts: both the person and the client."""
    return f"{OAUTH_ACTOR_PREFIX}{username}{OAUTH_CLIENT_SEPARATOR}{client_name}"[:ACTOR_CHARACTERS]


def oauth_actor_user(actor: str) -> str | None:
    """The username an OAuth actor (`actor_oauth`) acts for; None for any other actor."""
    if not actor.startswith(OAUTH_ACTOR_PREFIX) or OAUTH_CLIENT_SEPARATOR not in actor:
        return None
    return actor[len(OAUTH_ACTOR_PREFIX) :].split(OAUTH_CLIENT_SEPARATOR, 1)[0]


def actor_command(name: str) -> str:
    """How a management command is named in the trail."""
    return f"command:{name}"


@dataclass(frozen=True)
class Caller:
    """Who asks a service for a change, passed to it explicitly (never read from a
    thread-local): `actor` names them in the trail, `may_start_processes` says whether they
    may make this server start a process (`nodespecs.downstream.process_rights`), and `user` is the
    signed-in user, if any, who authors revisions.

    An API caller (`actor` "key:<prefix>", or `actor_oauth` for a client connected with
    OAuth) also carries its key's or token's `scopes` and the user it acts for
    (`key_owner_id`, `key_owner_name`); people in the admin and operators'
    commands carry `scopes` None: their rights are Django's permissions and the host's."""

    actor: str
    may_start_processes: bool = False
    user: AbstractBaseUser | None = None
    scopes: frozenset[str] | None = None
    key_owner_id: int | None = None
    key_owner_name: str = ""
    # The other actors whose runs count as this caller's own (every key of the user a key
    # acts for), where that matters (test_workflow's `from_run`, filled by
    # mcp_endpoint.access.keys.with_same_owner_actors); empty: only `actor` itself.
    same_owner_actors: frozenset[str] = frozenset()
    # Requests per minute an API caller may make; None: the configured default
    # (mcp_endpoint/access/ratelimit.py).
    rate_limit: int | None = None

    @property
    def own_actors(self) -> frozenset[str]:
        """The `Run.caller` values of the runs that are this caller's own: its actor and
        `same_owner_actors`. An empty actor (no one in particular) owns no run."""
        return frozenset(actor for actor in {self.actor, *self.same_owner_actors} if actor)

    @property
    def trail_name(self) -> str:
        """How the trail names this caller: `actor`, with the user an API key acts for."""
        return f"{self.actor} ({self.key_owner_name})" if self.key_owner_name else self.actor

    @property
    def is_api_caller(self) -> bool:
        """True for a caller through an API key (MCP, REST), whose rights are its scopes."""
        return self.scopes is not None

    @property
    def user_id(self) -> int | None:
        """The user this caller acts for: the signed-in user, or an API key's owner."""
        if self.user is not None:
            return self.user.pk
        return self.key_owner_id

    def has_scope(self, scope: str) -> bool:
        """Whether an API caller's key grants `scope`; people and operators always do (their
        rights are checked elsewhere)."""
        return self.scopes is None or scope in self.scopes


def caller_user(user: AbstractBaseUser) -> Caller:
    """A signed-in user: only an active superuser may start processes."""
    return Caller(
        actor=actor_user(user),
        # getattr: a user model without PermissionsMixin has no superusers at all.
        may_start_processes=bool(user.is_active and getattr(user, "is_superuser", False)),
        user=user,
    )


def caller_command(name: str) -> Caller:
    """An operator running a management command: they can already run any process."""
    return Caller(actor=actor_command(name), may_start_processes=True)
