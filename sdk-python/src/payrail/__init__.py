"""The Python library of the Payrail partner API.

- :class:`Client` and :class:`AsyncClient`: OAuth 2.0 client credentials with a token cache
  (one fetch at a time, refreshed before it expires and once more on a 401), the
  institution's transactions, merchants and events as iterators that follow ``next_cursor``,
  typed filters, retries with backoff and jitter on 429 (honouring ``Retry-After``) and 5xx,
  never on other 4xx, timeouts, and typed errors that carry the API's ``error``,
  ``error_description`` and request id.
- :class:`Webhook`: verify a delivery's signature over the raw body (several secrets during a
  rotation, a replay window) and read it into a typed event.

::

    import payrail
    from datetime import datetime, timezone

    with payrail.Client("https://api.payrail.example", "cli_...", "sk_live_...") as client:
        today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
        for t in client.transactions.list(status=payrail.Status.PAID, created_after=today):
            print(t.id, t.external_reference, t.amount.gross, t.currency)
"""

from ._async import AsyncClient
from ._core import MAX_ANSWER_BYTES
from ._params import TimeBound
from ._sync import Client
from ._version import VERSION
from .errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    ConfigError,
    ConflictError,
    DecodeError,
    InvalidRequestError,
    NotFoundError,
    PayrailError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    WebhookVerificationError,
)
from .models import (
    Amount,
    AmountStatus,
    CheckoutSession,
    Currency,
    ErrorCode,
    Event,
    EventType,
    Merchant,
    MerchantStatus,
    Networks,
    OnboardingStatus,
    Page,
    PaymentPaid,
    PaymentRefunded,
    PaymentSucceeded,
    RawStatus,
    SandboxAction,
    Scope,
    Status,
    Transaction,
    TxHashes,
    UnknownEvent,
    WebhookTest,
    parse_event,
)
from .webhooks import (
    EVENT_ID_HEADER,
    EVENT_TYPE_HEADER,
    SIGNATURE_HEADER,
    Webhook,
    sign,
    signature_header,
)

__version__ = VERSION

__all__ = [
    "__version__",
    # Clients
    "Client",
    "AsyncClient",
    "MAX_ANSWER_BYTES",
    "TimeBound",
    # Models
    "Amount",
    "AmountStatus",
    "CheckoutSession",
    "Currency",
    "ErrorCode",
    "EventType",
    "Merchant",
    "MerchantStatus",
    "Networks",
    "OnboardingStatus",
    "Page",
    "RawStatus",
    "SandboxAction",
    "Scope",
    "Status",
    "Transaction",
    "TxHashes",
    # Events and webhooks
    "Event",
    "PaymentSucceeded",
    "PaymentPaid",
    "PaymentRefunded",
    "WebhookTest",
    "UnknownEvent",
    "parse_event",
    "Webhook",
    "sign",
    "signature_header",
    "SIGNATURE_HEADER",
    "EVENT_ID_HEADER",
    "EVENT_TYPE_HEADER",
    # Errors
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
