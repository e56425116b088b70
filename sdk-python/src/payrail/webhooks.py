"""Receiving webhooks: verify ``Payrail-Signature`` over the raw body, then read the event.

Every delivery carries ``Payrail-Signature: t=<unix seconds>,v1=<hex>`` (one ``v1`` per valid
secret during a rotation's grace period): the lower-case hex HMAC-SHA256 of
``<t>.<raw body>``, keyed with the endpoint's signing secret exactly as the portal shows it
(``whsec_`` prefix included). Verify the bytes as received, **before any JSON parsing**: a
body parsed and serialised again is not the body that was signed.

>>> from payrail import Webhook
>>> webhook = Webhook("whsec_...")                        # doctest: +SKIP
>>> event = webhook.verify(raw_body, request.headers.get("Payrail-Signature"))  # doctest: +SKIP

Header rules (shared with every Payrail library through
``shared-types/vectors/webhook-signatures.json``): parts are split on ``,`` and trimmed;
``t`` must be an integer; every ``v1`` is a candidate; other schemes are ignored; a part
without ``=`` is malformed; the comparison is of lower-case hex, in constant time, against
every secret.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Iterable
from typing import Any, Optional, Sequence, Tuple, Union

from .errors import WebhookVerificationError
from .models import Event, parse_event

__all__ = [
    "Webhook",
    "sign",
    "signature_header",
    "SIGNATURE_HEADER",
    "EVENT_ID_HEADER",
    "EVENT_TYPE_HEADER",
    "DEFAULT_TOLERANCE",
]

#: The header carrying the signature.
SIGNATURE_HEADER = "Payrail-Signature"
#: The header carrying the event id: deduplicate on it.
EVENT_ID_HEADER = "Payrail-Event-Id"
#: The header carrying the event type.
EVENT_TYPE_HEADER = "Payrail-Event-Type"
#: Seconds a signature's timestamp may be from the receiver's clock (either way).
DEFAULT_TOLERANCE = 300

Body = Union[bytes, bytearray, memoryview, str]

# What Rust's str::trim removes (Unicode White_Space), so that every library reads a header
# alike; str.strip() would also remove the ASCII separators \x1c-\x1f.
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_INTEGER = re.compile(r"[+-]?[0-9]+")
_I64 = 2**63


def _body_bytes(body: Any) -> bytes:
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        # Text is signed as its UTF-8 bytes; it must be the body exactly as received.
        return body.encode("utf-8")
    raise TypeError(
        f"pass the raw request body (bytes), not a {type(body).__name__}: verify before any "
        "JSON parsing (Flask: request.get_data(), FastAPI: await request.body(), "
        "Django: request.body)"
    )


def sign(secret: str, timestamp: int, body: Body) -> str:
    """The lower-case hex HMAC-SHA256 of ``<timestamp>.<body>`` keyed with ``secret``'s UTF-8
    bytes: the ``v1`` of a delivery. For testing your receiver."""
    mac = hmac.new(secret.encode("utf-8"), digestmod=hashlib.sha256)
    mac.update(str(int(timestamp)).encode("ascii"))
    mac.update(b".")
    mac.update(_body_bytes(body))
    return mac.hexdigest()


def signature_header(secrets: Union[str, Sequence[str]], timestamp: int, body: Body) -> str:
    """A ``Payrail-Signature`` value for ``body``: one ``v1`` per secret. For testing your
    receiver."""
    keys = [secrets] if isinstance(secrets, str) else list(secrets)
    return ",".join([f"t={int(timestamp)}"] + [f"v1={sign(k, timestamp, body)}" for k in keys])


def _parse_header(header: Optional[str]) -> Tuple[int, Sequence[str]]:
    if not isinstance(header, str):
        raise WebhookVerificationError(WebhookVerificationError.MALFORMED_HEADER)
    timestamp: Optional[int] = None
    candidates = []
    for part in header.split(","):
        key, sep, value = part.strip(_WHITE_SPACE).partition("=")
        if not sep:
            raise WebhookVerificationError(WebhookVerificationError.MALFORMED_HEADER)
        if key == "t":
            if not _INTEGER.fullmatch(value) or not -_I64 <= int(value) < _I64:
                raise WebhookVerificationError(WebhookVerificationError.MALFORMED_HEADER)
            timestamp = int(value)
        elif key == "v1":
            candidates.append(value)
        # Other schemes may be added later: ignored.
    if timestamp is None or not candidates:
        raise WebhookVerificationError(WebhookVerificationError.MALFORMED_HEADER)
    return timestamp, candidates


class Webhook:
    """Verifies and reads the deliveries of one webhook endpoint.

    ``secret_or_secrets`` is the endpoint's signing secret (``whsec_...``), or several while
    your configuration moves from an old secret to a new one (a delivery is accepted when any
    ``v1`` matches any secret). ``tolerance`` is how many seconds a signature's timestamp may
    be from your clock: older deliveries are refused as replays.
    """

    def __init__(
        self, secret_or_secrets: Union[str, Iterable[str]], tolerance: int = DEFAULT_TOLERANCE
    ) -> None:
        given: object = secret_or_secrets
        if isinstance(given, str):
            secrets = [given]
        elif isinstance(given, Iterable) and not isinstance(given, (bytes, bytearray)):
            secrets = list(given)
        else:
            raise TypeError("give the endpoint's signing secret (whsec_...) as a str, or a list of them")
        if not secrets or not all(isinstance(s, str) and s for s in secrets):
            raise ValueError("give the endpoint's signing secret (whsec_...), or a list of them")
        if isinstance(tolerance, bool) or not isinstance(tolerance, int) or tolerance < 0:
            raise ValueError("tolerance must be a number of seconds, 0 or more")
        self._keys = tuple(s.encode("utf-8") for s in secrets)
        self.tolerance = tolerance

    def __repr__(self) -> str:
        # The secrets stay out of logs: how many there are is all it says of them.
        return f"Webhook(secrets=<{len(self._keys)} redacted>, tolerance={self.tolerance})"

    def verify(
        self, raw_body: Body, signature_header: Optional[str], now: Optional[int] = None
    ) -> Event:
        """Verifies ``signature_header`` (the ``Payrail-Signature`` value; ``None`` when the
        request had none) over ``raw_body`` (the bytes as received) at Unix time ``now``
        (default: the system clock), then reads the event.

        Raises :class:`~payrail.WebhookVerificationError` (answer 400) when the delivery is not
        Payrail's, and :class:`~payrail.DecodeError` when it is signed but is not an event
        this library reads (answer 5xx: Payrail retries it, and an upgrade will read it).
        """
        self.check(raw_body, signature_header, now)
        return parse_event(_body_bytes(raw_body))

    def check(self, raw_body: Body, signature_header: Optional[str], now: Optional[int] = None) -> None:
        """Verifies as :meth:`verify` does, without reading the event."""
        body = _body_bytes(raw_body)
        timestamp, candidates = _parse_header(signature_header)
        current = int(time.time()) if now is None else int(now)
        if abs(current - timestamp) > self.tolerance:
            raise WebhookVerificationError(WebhookVerificationError.TIMESTAMP_OUT_OF_TOLERANCE)
        signed = str(timestamp).encode("ascii") + b"." + body
        matched = False
        # Every pair is compared, in constant time, whatever matched first.
        for key in self._keys:
            expected = hmac.new(key, signed, hashlib.sha256).hexdigest().encode("ascii")
            for candidate in candidates:
                matched |= hmac.compare_digest(candidate.encode("utf-8"), expected)
        if not matched:
            raise WebhookVerificationError(WebhookVerificationError.NO_MATCHING_SIGNATURE)
