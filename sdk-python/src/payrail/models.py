"""The API's resources as frozen dataclasses, and the string enums of the contract.

Amounts are :class:`~decimal.Decimal` (they are decimal strings on the wire: never a float),
times are aware UTC :class:`~datetime.datetime`. Every model lists its JSON members in
``__wire__`` (see ``payrail._wire``); a test checks those lists against
``edge-api/openapi.json``.

**Values newer than this library.** The API may add enum values and members within v1
(docs/API.md, "Versioning"). A member this version does not know is ignored. An enum value it
does not know is kept as the plain string, so a field typed ``Status | str`` holds
``Status.PAID`` or, say, ``"disputed"``: compare with ``==`` (``t.status == Status.PAID`` and
``t.status == "paid"`` both work, as the enums are ``str`` enums) and keep a default branch.
Events of a type this version does not know arrive as :class:`UnknownEvent`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import (
    Any,
    Callable,
    ClassVar,
    Dict,
    Generic,
    Iterator,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from ._wire import Kind, Member, Model, StrEnum, decode_members
from .errors import DecodeError

__all__ = [
    "Status",
    "RawStatus",
    "AmountStatus",
    "MerchantStatus",
    "OnboardingStatus",
    "EventType",
    "ErrorCode",
    "Currency",
    "SandboxAction",
    "Scope",
    "Amount",
    "Networks",
    "TxHashes",
    "Transaction",
    "Merchant",
    "CheckoutSession",
    "Page",
    "Event",
    "PaymentSucceeded",
    "PaymentPaid",
    "PaymentRefunded",
    "WebhookTest",
    "UnknownEvent",
    "parse_event",
]


# --- Enums -------------------------------------------------------------------------------------


class Status(StrEnum):
    """A transaction's normalized status (what to filter and branch on)."""

    PENDING = "pending"
    #: Paid by the customer: held in the custodial wallet (raw ``succeeded``) or settled to the
    #: merchant (raw ``paid``).
    PAID = "paid"
    #: Failed or expired.
    FAILED = "failed"
    REFUNDED = "refunded"
    PARTIALLY_REFUNDED = "partially_refunded"


class RawStatus(StrEnum):
    """A transaction's internal status; maps onto :class:`Status`."""

    PENDING = "pending"
    #: The customer's payment landed in the custodial wallet.
    SUCCEEDED = "succeeded"
    #: The funds were transferred to the merchant's wallet.
    PAID = "paid"
    FAILED = "failed"
    #: No payment arrived before the checkout expired.
    EXPIRED = "expired"
    REFUNDED = "refunded"
    PARTIALLY_REFUNDED = "partially_refunded"
    #: The payment reached custody from an address its sanctions screening stopped: it waits for
    #: the institution's review (released: ``succeeded``; blocked: ``failed``). Its status is
    #: ``pending``.
    HELD = "held"


class AmountStatus(StrEnum):
    """How the amount paid compares with the amount requested (informational: compare
    ``amount.gross`` with your order before fulfilling)."""

    EXACT = "EXACT"
    UNDERPAID = "UNDERPAID"
    OVERPAID = "OVERPAID"


class MerchantStatus(StrEnum):
    """A merchant's account status."""

    ACTIVE = "active"
    SUSPENDED = "suspended"
    DISABLED = "disabled"


class OnboardingStatus(StrEnum):
    """Where a merchant is in onboarding."""

    PENDING = "pending"
    IN_REVIEW = "in_review"
    COMPLETED = "completed"
    REJECTED = "rejected"


class EventType(StrEnum):
    """The type of a webhook event."""

    #: The customer's payment is held in the custodial wallet.
    PAYMENT_SUCCEEDED = "payment.succeeded"
    #: Settled to the merchant. Fulfil only after checking ``amount.gross`` against your order.
    PAYMENT_PAID = "payment.paid"
    #: Refunded, in full or in part.
    PAYMENT_REFUNDED = "payment.refunded"
    #: A test event sent from the portal, carrying a sample transaction (never in the feed).
    WEBHOOK_TEST = "webhook.test"


class ErrorCode(StrEnum):
    """The ``error`` codes of the API's error body (:attr:`payrail.APIError.code`)."""

    INVALID_REQUEST = "invalid_request"
    INVALID_CLIENT = "invalid_client"
    UNSUPPORTED_GRANT_TYPE = "unsupported_grant_type"
    UNAUTHORIZED_CLIENT = "unauthorized_client"
    INVALID_SCOPE = "invalid_scope"
    INVALID_TOKEN = "invalid_token"
    INSUFFICIENT_SCOPE = "insufficient_scope"
    NOT_FOUND = "not_found"
    MERCHANT_UNAVAILABLE = "merchant_unavailable"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    INVALID_CREDENTIALS = "invalid_credentials"
    LOGIN_REQUIRED = "login_required"
    CSRF_FAILED = "csrf_failed"
    RATE_LIMITED = "rate_limited"
    CONFLICT = "conflict"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    REQUEST_TIMEOUT = "request_timeout"
    PAYMENTS_UNAVAILABLE = "payments_unavailable"
    REDIRECT_NOT_ALLOWED = "redirect_not_allowed"
    ADMIN_REQUIRED = "admin_required"
    SERVER_ERROR = "server_error"


class Currency(StrEnum):
    """The order currencies a checkout takes."""

    EUR = "EUR"
    USD = "USD"
    GBP = "GBP"
    CHF = "CHF"
    JPY = "JPY"


class SandboxAction(StrEnum):
    """A lifecycle action of the sandbox (``POST /sandbox/transactions/{id}/{action}``)."""

    #: The customer pays ``amount`` (order currency).
    PAY = "pay"
    #: Settle to the merchant (optionally on another ``network``: a bridge).
    SETTLE = "settle"
    #: Refund ``amount``.
    REFUND = "refund"
    #: The payment fails.
    FAIL = "fail"


class Scope(StrEnum):
    """The OAuth scopes a client can be granted."""

    TRANSACTIONS_READ = "transactions:read"
    MERCHANTS_READ = "merchants:read"
    EVENTS_READ = "events:read"
    #: Sandbox clients only.
    SANDBOX_WRITE = "sandbox:write"


# --- Resources ---------------------------------------------------------------------------------


def _nullable(name: str, kind: Kind) -> Member:
    return Member(name, kind, nullable=True)


@dataclass(frozen=True)
class Amount(Model):
    """A transaction's amounts, in the order's currency; ``None`` until known.

    ``net`` = ``gross`` - ``psp_fee`` - ``gas_fee`` - ``bridge_fee``.
    """

    __schema__: ClassVar[str] = "Amount"
    __wire__: ClassVar[Tuple[Member, ...]] = tuple(
        _nullable(name, Kind.DECIMAL)
        for name in ("gross", "net", "expected", "psp_fee", "gas_fee", "bridge_fee")
    )

    #: What the customer actually paid. Fulfil only when it is at least your order's amount.
    gross: Optional[Decimal]
    #: What was credited to the merchant.
    net: Optional[Decimal]
    #: What was requested.
    expected: Optional[Decimal]
    psp_fee: Optional[Decimal]
    gas_fee: Optional[Decimal]
    bridge_fee: Optional[Decimal]


@dataclass(frozen=True)
class Networks(Model):
    """The networks of a transaction (``polygon``, ``base``, ...)."""

    __schema__: ClassVar[str] = "Networks"
    __wire__: ClassVar[Tuple[Member, ...]] = (
        _nullable("payment", Kind.STRING),
        _nullable("settlement", Kind.STRING),
    )

    #: The network the customer paid on.
    payment: Optional[str]
    #: The network of the transfer to the merchant.
    settlement: Optional[str]


@dataclass(frozen=True)
class TxHashes(Model):
    """Chain transaction hashes of a transaction."""

    __schema__: ClassVar[str] = "TxHashes"
    __wire__: ClassVar[Tuple[Member, ...]] = (
        _nullable("source", Kind.STRING),
        _nullable("bridge", Kind.STRING),
        _nullable("settlement", Kind.STRING),
    )

    #: The customer's payment.
    source: Optional[str]
    #: The bridge transfer, when the settlement crossed networks.
    bridge: Optional[str]
    #: The transfer to the merchant.
    settlement: Optional[str]


@dataclass(frozen=True)
class Transaction(Model):
    """A payment, as ``GET /v1/transactions`` and webhook events show it."""

    __schema__: ClassVar[str] = "Transaction"
    __wire__: ClassVar[Tuple[Member, ...]] = (
        Member("object", Kind.CONST, const="transaction", keep=False),
        Member("id", Kind.INTEGER),
        Member("merchant_id", Kind.INTEGER),
        Member("status", Kind.ENUM, enum=Status),
        Member("raw_status", Kind.ENUM, enum=RawStatus),
        Member("amount_status", Kind.ENUM, nullable=True, enum=AmountStatus),
        _nullable("asset", Kind.STRING),
        _nullable("currency", Kind.STRING),
        Member("amount", Kind.OBJECT, model=Amount),
        Member("networks", Kind.OBJECT, model=Networks),
        Member("tx_hashes", Kind.OBJECT, model=TxHashes),
        _nullable("customer_email", Kind.STRING),
        _nullable("external_reference", Kind.STRING),
        _nullable("created_at", Kind.TIMESTAMP),
        _nullable("paid_at", Kind.TIMESTAMP),
    )

    #: Transaction id; ids grow in creation order ("newest first" is "highest id first").
    id: int
    #: The owning merchant.
    merchant_id: int
    status: Union[Status, str]
    raw_status: Union[RawStatus, str]
    #: Set once a payment lands; informational.
    amount_status: Union[AmountStatus, str, None]
    #: Crypto asset code, e.g. ``USDC``.
    asset: Optional[str]
    #: The order's currency code, e.g. ``EUR``: every amount is in it.
    currency: Optional[str]
    amount: Amount
    networks: Networks
    tx_hashes: TxHashes
    customer_email: Optional[str]
    #: Your order id, as given to the checkout (``externalReference``).
    external_reference: Optional[str]
    created_at: Optional[datetime]
    #: When the customer's payment landed.
    paid_at: Optional[datetime]


@dataclass(frozen=True)
class Merchant(Model):
    """A merchant of your institution. Every member is always present."""

    __schema__: ClassVar[str] = "Merchant"
    __wire__: ClassVar[Tuple[Member, ...]] = (
        Member("object", Kind.CONST, const="merchant", keep=False),
        Member("id", Kind.INTEGER),
        Member("name", Kind.STRING),
        Member("legal_name", Kind.STRING),
        Member("email", Kind.STRING),
        Member("public_key", Kind.STRING),
        Member("psp_reference_id", Kind.STRING),
        Member("status", Kind.ENUM, enum=MerchantStatus),
        Member("onboarding_status", Kind.ENUM, enum=OnboardingStatus),
        Member("crypto_enabled", Kind.BOOLEAN),
        Member("onboarding_complete", Kind.BOOLEAN),
        Member("created_at", Kind.TIMESTAMP),
    )

    id: int
    name: str
    legal_name: str
    email: str
    #: The publishable key (``pk_live_...``) the browser script uses.
    public_key: str
    #: Your own reference for the merchant, set at onboarding.
    psp_reference_id: str
    status: Union[MerchantStatus, str]
    onboarding_status: Union[OnboardingStatus, str]
    crypto_enabled: bool
    onboarding_complete: bool
    created_at: datetime


@dataclass(frozen=True)
class CheckoutSession(Model):
    """A checkout session: the hosted page for one payment (sandbox helper)."""

    __schema__: ClassVar[str] = "CheckoutSession"
    __wire__: ClassVar[Tuple[Member, ...]] = (
        Member("id", Kind.STRING),
        Member("transaction_id", Kind.INTEGER),
        Member("url", Kind.STRING),
    )

    #: ``cs_...``.
    id: str
    #: The pending transaction it created.
    transaction_id: int
    #: The hosted checkout page.
    url: str


@dataclass(frozen=True)
class TokenResponse(Model):
    """The token endpoint's answer (internal: the client keeps the token to itself)."""

    __schema__: ClassVar[str] = "TokenResponse"
    __wire__: ClassVar[Tuple[Member, ...]] = (
        Member("access_token", Kind.STRING),
        Member("token_type", Kind.CONST, const="Bearer"),
        Member("expires_in", Kind.CONST, const=3600),
        Member("scope", Kind.STRING),
    )

    access_token: str = field(repr=False)
    token_type: str
    #: Seconds; read as given (the document pins 3600 today).
    expires_in: int
    scope: str


@dataclass(frozen=True)
class ErrorBody(Model):
    """The error body of every failed request (internal: see :class:`payrail.APIError`)."""

    __schema__: ClassVar[str] = "Error"
    __wire__: ClassVar[Tuple[Member, ...]] = (
        Member("error", Kind.ENUM, enum=ErrorCode),
        Member("error_description", Kind.STRING, nullable=True),
    )

    error: Union[ErrorCode, str]
    error_description: Optional[str]


# --- Events ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event(Model):
    """A webhook event, as a delivery carries it and as the events feed lists it.

    One class per known type (:class:`PaymentSucceeded`, :class:`PaymentPaid`,
    :class:`PaymentRefunded`, :class:`WebhookTest`), each with the transaction as ``data``, and
    :class:`UnknownEvent` for a type newer than this library (acknowledge it; ``data`` is kept
    as parsed JSON).
    """

    __schema__: ClassVar[str] = "Event"
    __wire__: ClassVar[Tuple[Member, ...]] = (
        Member("id", Kind.STRING),
        Member("type", Kind.ENUM, enum=EventType),
        Member("created", Kind.INTEGER),
        Member("data", Kind.OBJECT, model=Transaction),
    )

    #: ``evt_...``: deduplicate on it (deliveries can repeat).
    id: str
    #: The type as the wire names it (an :class:`EventType` for the known ones).
    type: str
    #: Unix seconds the event was created (see :attr:`created_at`).
    created: int

    @property
    def created_at(self) -> datetime:
        """``created`` as an aware UTC datetime."""
        return datetime.fromtimestamp(self.created, tz=timezone.utc)

    @property
    def transaction(self) -> Optional[Transaction]:
        """The transaction the event carries, as it stood when the event was made (``None``
        for an :class:`UnknownEvent`)."""
        data = getattr(self, "data", None)
        return data if isinstance(data, Transaction) else None

    @classmethod
    def _from_wire(cls, value: Any, where: str) -> Event:
        envelope = decode_members(cls.__wire__[:3], value, where)
        kind = _EVENT_CLASSES.get(envelope["type"])
        if kind is None:
            return UnknownEvent(data=value.get("data"), **envelope)
        data = decode_members(cls.__wire__[3:], value, where)["data"]
        return kind(data=data, **envelope)


@dataclass(frozen=True)
class PaymentSucceeded(Event):
    """``payment.succeeded``: the customer's payment is held in the custodial wallet."""

    data: Transaction


@dataclass(frozen=True)
class PaymentPaid(Event):
    """``payment.paid``: settled to the merchant.

    Fulfil only after finding your order by ``data.merchant_id`` and
    ``data.external_reference`` and checking that ``data.amount.gross`` is at least its amount:
    the amount in the browser was untrusted.
    """

    data: Transaction


@dataclass(frozen=True)
class PaymentRefunded(Event):
    """``payment.refunded``: refunded in full (``refunded``) or in part
    (``partially_refunded``)."""

    data: Transaction


@dataclass(frozen=True)
class WebhookTest(Event):
    """``webhook.test``: sent from the portal to one endpoint, with a sample transaction."""

    data: Transaction


@dataclass(frozen=True)
class UnknownEvent(Event):
    """An event of a type this version of the library does not know: acknowledge it (and
    upgrade to read it). ``data`` is the JSON as parsed."""

    data: Any


_EVENT_CLASSES: Dict[Any, Callable[..., Event]] = {
    EventType.PAYMENT_SUCCEEDED: PaymentSucceeded,
    EventType.PAYMENT_PAID: PaymentPaid,
    EventType.PAYMENT_REFUNDED: PaymentRefunded,
    EventType.WEBHOOK_TEST: WebhookTest,
}


def parse_event(body: Union[bytes, bytearray, memoryview, str]) -> Event:
    """Parses an event body **that was already verified** (use :meth:`payrail.Webhook.verify`
    for a delivery). Raises :class:`~payrail.DecodeError` when it is not an event."""
    try:
        value = json.loads(bytes(body) if not isinstance(body, str) else body)
    except (ValueError, RecursionError):
        raise DecodeError("the body is not JSON") from None
    return Event._from_wire(value, "event")


# --- Pages -------------------------------------------------------------------------------------

T = TypeVar("T")
C = TypeVar("C", int, str)


@dataclass(frozen=True)
class Page(Generic[T, C]):
    """One page of a list, newest first. Iterating a page iterates its ``data``.

    ``next_cursor`` is what to pass as ``starting_after`` for the next page (an id; an event
    id for the events feed); ``None`` exactly when ``has_more`` is false.
    """

    data: Tuple[T, ...]
    has_more: bool
    next_cursor: Optional[C]

    def __iter__(self) -> Iterator[T]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def list_members(item: Type[Model], cursor: Kind) -> Tuple[Member, ...]:
    """The wire shape of a list envelope of ``item`` with a ``cursor`` of that kind."""
    return (
        Member("object", Kind.CONST, const="list", keep=False),
        Member("data", Kind.ARRAY, model=item),
        Member("has_more", Kind.BOOLEAN),
        Member("next_cursor", cursor, nullable=True),
    )


#: The list envelopes the client reads, by the schema each stands for.
LISTS = {
    "TransactionList": list_members(Transaction, Kind.INTEGER),
    "MerchantList": list_members(Merchant, Kind.INTEGER),
    "EventList": list_members(Event, Kind.STRING),
}
