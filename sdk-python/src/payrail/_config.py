"""A client's settings, checked once when it is made: the base URL (https, or http to this
machine only), the scope, the time limits and the retry policy; and the wrapper that keeps the
client secret out of every ``repr``."""

from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable, Optional, Union

import httpx

from .errors import ConfigError
from .models import Scope


@dataclass(frozen=True)
class RetryPolicy:
    """How failed requests are retried: 429 (honouring ``Retry-After``), 5xx and network
    failures of requests that are safe to repeat, failures to connect of any request. Never
    any other 4xx."""

    #: Tries after the first.
    max_retries: int = 3
    #: Backoff before the first retry, in seconds, doubled each time...
    initial_backoff: float = 0.25
    #: ...up to this.
    max_backoff: float = 8.0
    #: A ``Retry-After`` longer than this is not waited for: the error is raised with it.
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int):
            raise ConfigError("max_retries must be an int")
        if self.max_retries < 0:
            raise ConfigError("max_retries must be 0 or more")
        for name in ("initial_backoff", "max_backoff", "max_retry_after"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"{name} must be a number of seconds, 0 or more")

    def delay(self, attempt: int, retry_after: Optional[float]) -> Optional[float]:
        """Seconds to wait before retry number ``attempt + 1``, or ``None`` when no retry is
        left (or the server asks for longer than ``max_retry_after``)."""
        if attempt >= self.max_retries:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        backoff = min(self.initial_backoff * (1 << min(attempt, 62)), self.max_backoff)
        # "Equal jitter": half fixed, half random, so that clients that failed together spread
        # out, and no retry comes sooner than half the backoff.
        half = backoff / 2
        return half + random.uniform(0, half)


class Secret:
    """A secret kept out of ``repr``, ``str`` and so out of logs and tracebacks."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<redacted>"

    __str__ = __repr__


def base_url(text: Any) -> httpx.URL:
    """The API's base URL, ending in ``/``: ``https``, or plain ``http`` to this machine only
    (a local worker), since the client's secret goes to the token endpoint."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("base_url must be a URL such as https://api.payrail.example")
    try:
        url = httpx.URL(text.strip())
    except (httpx.InvalidURL, ValueError, TypeError):
        raise ConfigError("base_url is not a URL") from None
    if url.userinfo:
        # Never echoed: it would be a credential.
        raise ConfigError("base_url must not carry a user name or password")
    if url.scheme not in ("https", "http") or not url.host:
        raise ConfigError(f"base_url must be an https URL, not {url.scheme or 'no'} scheme")
    if url.scheme == "http" and not is_loopback(url.host):
        raise ConfigError(
            f"base_url is plain http to {url.host}: use https (http is for 127.0.0.1, ::1 "
            "and localhost only, where a local worker runs)"
        )
    if url.query or url.fragment:
        raise ConfigError("base_url takes no query or fragment")
    path = url.path if url.path.endswith("/") else url.path + "/"
    return url.copy_with(path=path)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        name = host.lower().rstrip(".")
        return name == "localhost" or name.endswith(".localhost")


def scope_text(scope: Union[str, Iterable[Union[Scope, str]], None]) -> Optional[str]:
    """The ``scope`` form field: space-separated."""
    if scope is None:
        return None
    if isinstance(scope, str):
        names = scope.split()
    else:
        names = [str(s.value) if isinstance(s, Enum) else s for s in scope]
        if not all(isinstance(n, str) and n and not any(c.isspace() for c in n) for n in names):
            raise ConfigError("scope: give scope names such as 'transactions:read'")
    if not names:
        raise ConfigError("scope is empty: leave it out to ask for every granted scope")
    return " ".join(names)


def timeouts(timeout: float, connect_timeout: float) -> httpx.Timeout:
    for name, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ConfigError(f"{name} must be a positive number of seconds")
    return httpx.Timeout(timeout, connect=min(connect_timeout, timeout))
