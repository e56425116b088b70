"""What can go wrong talking to the API or receiving a webhook.

Every exception the library raises on purpose is a :class:`PayrailError`:

- :class:`APIError`: the API answered with an error status. It carries the HTTP ``status``, the
  error body's ``code`` and ``description`` (docs/API.md, "Errors"), the answer's
  ``request_id`` (its ``Payrail-Request-Id`` header, for support) and, on a 429, the
  ``retry_after`` it asked for. A subclass per status family: :class:`InvalidRequestError`
  (400), :class:`AuthenticationError` (401), :class:`PermissionDeniedError` (403),
  :class:`NotFoundError` (404), :class:`ConflictError` (409), :class:`RateLimitError` (429),
  :class:`ServerError` (5xx).
- :class:`APIConnectionError`: no answer (refused connection, reset, DNS); its subclass
  :class:`APITimeoutError` when a time limit passed.
- :class:`DecodeError`: an answer that is not what the contract says (a bug on one side), or
  one larger than the client reads.
- :class:`ConfigError`: an unusable setting of the client (also a :class:`ValueError`).
- :class:`WebhookVerificationError`: a webhook delivery that is not Payrail's, with a
  ``reason``.

No message names a secret: not the client secret, not an access token, not a signing secret.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Optional, Tuple

__all__ = [
    "PayrailError",
    "APIError",
    "InvalidRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "RateLimitError",
    "ServerError",
    "APIConnectionError",
    "APITimeoutError",
    "DecodeError",
    "ConfigError",
    "WebhookVerificationError",
]


class PayrailError(Exception):
    """The base of every error this library raises."""


class APIError(PayrailError):
    """The API answered with an error status.

    ``code`` is the error body's ``error`` (``invalid_request``, ``insufficient_scope``, ...;
    see :class:`payrail.ErrorCode`), or ``None`` when the answer had no Payrail error body (a
    proxy's error page, say). ``description`` names the problem (for ``invalid_request``, the
    parameter at fault). 4xx other than 429 are never retried; 429 and 5xx were retried before
    this was raised.
    """

    def __init__(
        self,
        status: int,
        code: Optional[str],
        description: str,
        *,
        request_id: Optional[str] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        self.status = status
        self.code = code
        self.description = description
        self.request_id = request_id
        #: Seconds the API asked to wait (``Retry-After``), when it did.
        self.retry_after = retry_after
        super().__init__(self._message())

    def _message(self) -> str:
        text = f"{self.code or 'error'} ({self.status})"
        if self.description:
            text += f": {self.description}"
        if self.retry_after is not None:
            text += f" [retry after {self.retry_after:g} s]"
        if self.request_id:
            text += f" [request {self.request_id}]"
        return text

    def __reduce__(self) -> Tuple[Any, ...]:
        # Keyword arguments survive pickling (a worker process re-raising it, say).
        rebuild = partial(type(self), request_id=self.request_id, retry_after=self.retry_after)
        return (rebuild, (self.status, self.code, self.description))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, "
            f"description={self.description!r}, request_id={self.request_id!r}, "
            f"retry_after={self.retry_after!r})"
        )


class InvalidRequestError(APIError):
    """400: a parameter is unknown, repeated, empty or malformed (``description`` names it),
    or the token request was refused (``unsupported_grant_type``, ``invalid_scope``)."""


class AuthenticationError(APIError):
    """401 ``invalid_client``: wrong client credentials, or a token that is no longer valid
    even after fetching a new one (the secret was rotated)."""


class PermissionDeniedError(APIError):
    """403: the token lacks the operation's scope (``insufficient_scope``), or the merchant
    cannot take payments (``merchant_unavailable``, ``redirect_not_allowed``)."""


class NotFoundError(APIError):
    """404 ``not_found``. Lookups (``retrieve``) answer ``None`` instead of raising it."""


class ConflictError(APIError):
    """409 ``conflict``: an idempotency key reused with other options, or a sandbox action the
    payment's status does not allow."""


class RateLimitError(APIError):
    """429 ``rate_limited`` that outlasted the retries, or asked for a wait longer than the
    client's ``max_retry_after``: ``retry_after`` says how long."""


class ServerError(APIError):
    """5xx that outlasted the retries (or of a request that is not safe to repeat)."""


class APIConnectionError(PayrailError):
    """The request did not complete: the connection was refused or reset, the name did not
    resolve, the answer was cut short."""


class APITimeoutError(APIConnectionError):
    """The request took longer than the client's time limits."""


class DecodeError(PayrailError):
    """The API answered something that is not what the contract says, or an answer larger
    than the client reads (``payrail.MAX_ANSWER_BYTES``)."""

    def __init__(
        self, message: str, *, status: Optional[int] = None, request_id: Optional[str] = None
    ) -> None:
        self.status = status
        self.request_id = request_id
        text = message if status is None else f"unexpected answer ({status}): {message}"
        if request_id:
            text += f" [request {request_id}]"
        self.message = message
        super().__init__(text)

    def __reduce__(self) -> Tuple[Any, ...]:
        rebuild = partial(type(self), status=self.status, request_id=self.request_id)
        return (rebuild, (self.message,))


class ConfigError(PayrailError, ValueError):
    """The client was given an unusable setting (a base URL that is not https, say)."""


class WebhookVerificationError(PayrailError):
    """A webhook delivery failed verification: answer it 400.

    ``reason`` is ``"malformed_header"`` (no ``Payrail-Signature``, or one without ``t`` or
    ``v1``, or with a part that is not ``key=value``), ``"timestamp_out_of_tolerance"`` (signed
    further from now than the tolerance: a replay) or ``"no_matching_signature"`` (a forgery,
    a body changed on the way, or the wrong secret).
    """

    MALFORMED_HEADER = "malformed_header"
    TIMESTAMP_OUT_OF_TOLERANCE = "timestamp_out_of_tolerance"
    NO_MATCHING_SIGNATURE = "no_matching_signature"

    _MESSAGES = {
        MALFORMED_HEADER: "the Payrail-Signature header is missing or malformed",
        TIMESTAMP_OUT_OF_TOLERANCE: "the signature's timestamp is outside the tolerance",
        NO_MATCHING_SIGNATURE: "no signature matches",
    }

    def __init__(self, reason: str) -> None:
        if reason not in self._MESSAGES:
            raise ValueError(f"unknown webhook verification reason {reason!r}")
        self.reason = reason
        super().__init__(self._MESSAGES[reason])

    def __reduce__(self) -> Tuple[Any, ...]:
        return (type(self), (self.reason,))

    def __repr__(self) -> str:
        return f"WebhookVerificationError(reason={self.reason!r})"
