"""Secrets encrypted at rest: the keys, and a JSON model field stored as a Fernet token.

`EncryptedJSONField` keeps a JSON value (a provider's `env` and `headers`) in a text column
as a Fernet token, so code reads and writes the model attribute as a plain dict while the
database holds only ciphertext. Tokens are authenticated and carry a random IV: equal values
encrypt differently, so the column cannot be filtered on (compare in Python instead).

Keys come from `settings.SWITCHYARD_SECRETS_KEYS` (env `SWITCHYARD_SECRETS_KEY`, comma
separated): the first encrypts, every key decrypts, so rotation is "put the new key first,
run `manage.py rotate_secrets`, then drop the old key". Keys derived from `SECRET_KEY` (and
its fallbacks) always decrypt too, and encrypt when no key is configured: the embedded
default works with no setup, and values written before a key was configured stay readable
until `rotate_secrets` re-encrypts them. `check --deploy` warns about the derived key in
local development and refuses it in production.

A value that no key decrypts loads as `UnreadableSecrets`: the row still loads (lists and
pages work), and any use of the value raises `SecretsUnreadable` naming the object and what
to do.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django import forms
from django.conf import settings
from django.core import checks
from django.db import models
from django.db.models.query_utils import DeferredAttribute
from django.utils.crypto import salted_hmac

GENERATE_KEY = (
    'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
)
_DERIVATION_SALT = "switchyard.nodespecs.secrets"
REDACTED = "[redacted]"
# Shorter values ("1", "yes") would blank ordinary words out of messages, and give away little.
_REDACT_MIN_LENGTH = 4


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret of 4 characters or more replaced by `[redacted]`: for what a
    downstream server says (its stderr, its error messages) before it reaches our messages
    and logs. Longest first, so a secret that contains another is replaced whole."""
    longest_first = sorted(set(secrets), key=len, reverse=True)
    for secret in longest_first:
        if len(secret) >= _REDACT_MIN_LENGTH:
            text = text.replace(secret, REDACTED)
    return text


# What a credential in a URL or a command line reads as where it must not be shown (the mask
# graph documents use for env and header values too).
CREDENTIAL_MASK = "<secret>"
# Words that make a query parameter, a flag or a `NAME=value` name a secret ("api_key",
# "X-Amz-Signature", "accessToken", "--db-password"); and fragments that do inside one word
# ("accesstoken", "clientsecret").
_SECRET_WORDS = frozenset(
    {
        "token",
        "key",
        "apikey",
        "secret",
        "password",
        "passwd",
        "pwd",
        "pass",
        "auth",
        "authorization",
        "signature",
        "sig",
        "credential",
        "credentials",
        "cookie",
        "jwt",
    }
)
_SECRET_FRAGMENTS = ("token", "secret", "password", "passwd", "apikey", "credential", "signature")
# A URL: a scheme of at most 32 characters (bounded, so the search stays linear on any text),
# "://", and everything up to a space or a quote. "<" ends it too: a URL already masked is
# left as it is.
_URL = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,31}://[^\s\"'<>`]+")
# `--name value` and `--name=value` in a command line or a message, and `name=value`.
# A value ends at a space, a quote or "<" (one already masked is left alone); an assignment's
# at "&", ";", "," or "#" too, the separators of queries and lists.
_FLAG = re.compile(
    r"(?<!\S)(--?[A-Za-z][A-Za-z0-9_.\-]{0,40})(=|[ \t]{1,4})([^\s\"'<>-][^\s\"'<>]*)"
)
_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_.\-])([A-Za-z_][A-Za-z0-9_.\-]{0,40})=([^\s\"'<>&;,#]+)")
# User info in a URL given as a query value (not searched again, so nesting cannot recurse).
_NESTED_USERINFO = re.compile(r"://[^/?#@\s]{1,256}@")
_WORD_BREAK = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def is_secret_like(name: str) -> bool:
    """Whether a query parameter, flag or variable name looks like it holds a credential:
    one of its words is `token`, `key`, `secret`, `password`, `pwd`, `auth`, `sig`... (any
    case, `camelCase` and `snake_case` alike), or it contains `token`, `secret`..."""
    words = [word.lower() for word in _WORD_BREAK.split(name.lstrip("-")) if word]
    joined = "".join(words)
    return any(word in _SECRET_WORDS for word in words) or any(
        fragment in joined for fragment in _SECRET_FRAGMENTS
    )


def _masked_pairs(text: str) -> str:
    """`name=value&...` (a query) with secret-like names' values masked, and credentials in
    URLs given as other values (`?next=https://user:pass@...`: the user info whole)."""
    pairs = []
    for pair in text.split("&"):
        name, equals, value = pair.partition("=")
        if equals and value and is_secret_like(name):
            value = CREDENTIAL_MASK
        elif "://" in value:
            value = _NESTED_USERINFO.sub(f"://{CREDENTIAL_MASK}@", value)
        pairs.append(f"{name}{equals}{value}")
    return "&".join(pairs)


def _first_of(text: str, characters: str, start: int) -> int:
    """The index of the first of `characters` in `text` from `start`, else its length."""
    return next((i for i in range(start, len(text)) if text[i] in characters), len(text))


def _authority_end(rest: str) -> int:
    """Where a URL's authority (after "://") ends: at the first "/", "?" or "#"; but when it
    reads `user:pa/ss@host` (a password with one of those unescaped, as people write them),
    after the host that follows the "@", so the whole password is masked."""
    end = _first_of(rest, "/?#", 0)
    _, colon, port = rest[:end].partition(":")
    at = rest.find("@", end)
    if at != -1 and colon and not port.isdigit():
        return _first_of(rest, "/?#", at)
    return end


def mask_url(url: str) -> str:
    """`url` with its credentials masked: the user info (`user:<secret>@`, or `<secret>@`
    for a bare token), and the values of query and fragment parameters with secret-like
    names (`?api_key=<secret>`). Other parts are kept, so the URL still says where it goes."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    end = _authority_end(rest)
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        userinfo, _, host = authority.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        authority = f"{user}:{CREDENTIAL_MASK}@{host}" if colon else f"{CREDENTIAL_MASK}@{host}"
    elif not authority.startswith("["):  # an IPv6 address has colons of its own
        # `user:passw...`: a URL cut short (a long command line in a message) before its "@";
        # what follows the colon is no port, so it is the start of a password.
        user, colon, after = authority.partition(":")
        if colon and after and not after.isdigit():
            authority = f"{user}:{CREDENTIAL_MASK}"
    path, hash_mark, fragment = tail.partition("#")
    path, question, query = path.partition("?")
    if query:
        query = _masked_pairs(query)
    if "=" in fragment:
        fragment = _masked_pairs(fragment)
    return f"{scheme}://{authority}{path}{question}{query}{hash_mark}{fragment}"


def mask_credentials(text: str) -> str:
    """`text` (a URL, a command line, an error message) with the credentials it shows
    masked as `<secret>`: in every URL (`mask_url`), after `--token`/`--password`-style flags
    (`--token X`, `--token=X`), and in `name=value` pairs whose name is secret-like
    (`password=X` of a libpq DSN, `API_KEY=X`). For what a graph document shows and what a
    run's errors say; the secrets a connection is known to hold are `redact`'s job."""
    text = _URL.sub(lambda match: mask_url(match.group()), text)
    text = _FLAG.sub(
        lambda m: f"{m[1]}{m[2]}{CREDENTIAL_MASK}" if is_secret_like(m[1]) else m[0], text
    )
    return _ASSIGNMENT.sub(
        lambda m: f"{m[1]}={CREDENTIAL_MASK}" if is_secret_like(m[1]) else m[0], text
    )


def mask_command_args(args: Iterable[str]) -> tuple[str, ...]:
    """A stdio server's arguments with their credentials masked: each as `mask_credentials`
    masks it, and the argument after a lone secret-like flag (`--token`, `--api-key`,
    `--password`) wholly."""
    masked: list[str] = []
    after_flag = False
    for arg in args:
        if after_flag and not arg.startswith("-"):
            masked.append(CREDENTIAL_MASK)
            after_flag = False
            continue
        after_flag = (
            arg.startswith("-") and "=" not in arg and " " not in arg and is_secret_like(arg)
        )
        masked.append(mask_credentials(arg))
    return tuple(masked)


class SecretsUnreadable(Exception):
    """A stored secret could not be decrypted with any configured key."""


def _derived_key(secret_key: str) -> bytes:
    digest = salted_hmac(_DERIVATION_SALT, "fernet", secret=secret_key, algorithm="sha256")
    return base64.urlsafe_b64encode(digest.digest())


def uses_derived_key() -> bool:
    """Whether secrets are encrypted with the key derived from SECRET_KEY (none configured)."""
    return not settings.SWITCHYARD_SECRETS_KEYS


def _fernet() -> MultiFernet:
    derived = [
        _derived_key(secret)
        for secret in [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    ]
    configured = [key.encode() for key in settings.SWITCHYARD_SECRETS_KEYS]
    return MultiFernet([Fernet(key) for key in [*configured, *derived]])


def encrypt_json(value: Any) -> str:
    """`value` as JSON, encrypted with the first key."""
    return _fernet().encrypt(json.dumps(value).encode()).decode()


def decrypt_json(token: str) -> Any:
    """The JSON value of a token; raises `cryptography.fernet.InvalidToken` when no key fits."""
    return json.loads(_fernet().decrypt(token.encode()))


def _unreadable_message(field: str, owner: str) -> str:
    return (
        f"The stored {field} of {owner} cannot be decrypted with the keys in "
        "SWITCHYARD_SECRETS_KEY (or the key derived from SECRET_KEY): the key it was "
        "encrypted with is missing. Add that key to SWITCHYARD_SECRETS_KEY after the current "
        "one and run `python manage.py rotate_secrets`, or enter the values again in the admin."
    )


class UnreadableSecrets(Mapping[str, Any]):
    """Stands in for a stored value no key decrypts; any use raises `SecretsUnreadable`."""

    def __init__(self, field: str) -> None:
        self.field = field
        self.owner = "this object"

    def problem(self) -> SecretsUnreadable:
        """The error any use of this value raises."""
        return SecretsUnreadable(_unreadable_message(self.field, self.owner))

    def __getitem__(self, key: str) -> Any:
        raise self.problem()

    def __iter__(self) -> Iterator[str]:
        raise self.problem()

    def __len__(self) -> int:
        raise self.problem()

    def __repr__(self) -> str:
        return f"<UnreadableSecrets {self.field} of {self.owner}>"


class _SecretAttribute(DeferredAttribute):
    """Names the object an unreadable value belongs to, so the error can say which.

    A data descriptor (it has `__set__`), so reads come here even once the value is loaded.
    """

    def __get__(self, instance: models.Model | None, cls: Any = None) -> Any:
        value = super().__get__(instance, cls)
        if instance is not None and isinstance(value, UnreadableSecrets):
            value.owner = f"{instance._meta.verbose_name} {str(instance)!r}"
        return value

    def __set__(self, instance: models.Model, value: Any) -> None:
        instance.__dict__[self.field.attname] = value


class EncryptedJSONField(models.TextField):
    """A JSON value stored encrypted (a Fernet token in a text column)."""

    descriptor_class = _SecretAttribute
    # For django-stubs: the model attribute is a JSON value (or UnreadableSecrets), not the
    # str of a TextField.
    _pyi_private_set_type: Any
    _pyi_private_get_type: Any

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        if value is None:
            return None
        try:
            return decrypt_json(value)
        except InvalidToken:
            return UnreadableSecrets(self.name)

    def to_python(self, value: Any) -> Any:
        # A string is a token (a fixture written by `value_to_string`); anything else is the
        # value itself.
        if isinstance(value, str):
            return self.from_db_value(value, None, None)
        return value

    def get_prep_value(self, value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, UnreadableSecrets):
            raise value.problem()
        return encrypt_json(value)

    def value_to_string(self, obj: models.Model) -> str:
        # Serialised data (dumpdata) keeps the ciphertext, never the secret itself.
        return self.get_prep_value(self.value_from_object(obj)) or ""

    def formfield(self, **kwargs: Any) -> forms.Field:
        return forms.JSONField(**{"required": not self.blank, **kwargs})


# Deploy checks only: the derived key is the embedded default's design, and a warning on every
# `manage.py` command of a local start would teach people to skip warnings.
@checks.register(checks.Tags.security, deploy=True)
def check_secrets_key(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Warn when provider secrets are encrypted with the key derived from SECRET_KEY."""
    if not uses_derived_key() or not settings.DEBUG:
        return []
    return [
        checks.Warning(
            "SWITCHYARD_SECRETS_KEY is not set: provider secrets are encrypted with a key "
            "derived from SECRET_KEY, which is fine for local development only.",
            hint=f"Generate a key with: {GENERATE_KEY}",
            id="nodespecs.W001",
        )
    ]


@checks.register(checks.Tags.security, deploy=True)
def check_secrets_key_deploy(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """In production, provider secrets need a key of their own."""
    if not uses_derived_key() or settings.DEBUG:
        return []
    return [
        checks.Error(
            "SWITCHYARD_SECRETS_KEY is not set: provider secrets would be encrypted with a "
            "key derived from SECRET_KEY, so whoever holds SECRET_KEY and the database reads "
            "them, and retiring SECRET_KEY makes them unreadable.",
            hint=f"Set SWITCHYARD_SECRETS_KEY to a key generated with: {GENERATE_KEY}",
            id="nodespecs.E001",
        )
    ]
