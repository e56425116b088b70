"""What the client sends: the query parameters of each list, the checkout options and the
sandbox body, each declared once as :class:`~payrail._wire.Member` values. The resource
methods encode their arguments through these declarations (an argument that is not declared
is a bug caught at the first call) and the conformance test compares them with the operations
of ``edge-api/openapi.json``.

Values are checked for their Python type only; the API validates the rest and answers 400
``invalid_request`` naming the parameter (docs/API.md), which the client raises as
:class:`~payrail.InvalidRequestError`.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal
from enum import Enum
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._wire import Kind, Member
from .models import Currency, EventType, SandboxAction, Status

#: A time bound of a ``created_after`` / ``created_before`` filter: an aware ``datetime``, a
#: ``date`` (midnight UTC), Unix seconds, or text the API takes (``2026-11-21T04:35:27Z``,
#: ``2026-11-21``).
TimeBound = Union[datetime, date, int, str]

#: Query parameters, in the order they are sent.
Params = List[Tuple[str, str]]

#: A decimal amount to send: a ``Decimal``, an ``int`` or decimal text (``"25.00"``). Never a
#: ``float``: it cannot hold most cents exactly.
AmountInput = Union[Decimal, int, str]


def _filter(name: str, kind: Kind, **extra: Any) -> Member:
    return Member(name, kind, required=False, **extra)


_PAGING_BY_ID = (_filter("limit", Kind.INTEGER), _filter("starting_after", Kind.INTEGER))

#: ``GET /v1/transactions``.
TRANSACTION_FILTERS: Tuple[Member, ...] = _PAGING_BY_ID + (
    _filter("status", Kind.ENUM, enum=Status),
    _filter("merchant_id", Kind.INTEGER),
    _filter("external_reference", Kind.STRING),
    _filter("id", Kind.INTEGER),
    _filter("created_after", Kind.TIMEBOUND),
    _filter("created_before", Kind.TIMEBOUND),
)

#: ``GET /v1/merchants``.
MERCHANT_FILTERS: Tuple[Member, ...] = _PAGING_BY_ID + (
    _filter("id", Kind.INTEGER),
    _filter("psp_reference_id", Kind.STRING),
)


class FeedEventType(Enum):
    """The event types the feed's ``type`` filter takes: every :class:`EventType` but
    ``webhook.test``, which is sent to one endpoint and never kept in the feed."""

    PAYMENT_SUCCEEDED = EventType.PAYMENT_SUCCEEDED.value
    PAYMENT_PAID = EventType.PAYMENT_PAID.value
    PAYMENT_REFUNDED = EventType.PAYMENT_REFUNDED.value


#: ``GET /v1/events``.
EVENT_FILTERS: Tuple[Member, ...] = (
    _filter("limit", Kind.INTEGER),
    _filter("starting_after", Kind.STRING),
    _filter("type", Kind.ENUM, enum=FeedEventType),
    _filter("transaction_id", Kind.INTEGER),
    _filter("created_after", Kind.TIMEBOUND),
    _filter("created_before", Kind.TIMEBOUND),
)

#: The request header that carries a bookmark to a read, and the answer header it comes in.
BOOKMARK_HEADER = "Payrail-Bookmark"
#: The answer header naming the request, for support.
REQUEST_ID_HEADER = "Payrail-Request-Id"

#: ``POST /checkout/sessions`` (the browser script's options; ``allowCrypto`` is always true).
CHECKOUT_OPTIONS: Tuple[Member, ...] = (
    Member("publicKey", Kind.STRING, attr="public_key"),
    Member("amount", Kind.NUMBER_OR_STRING),
    Member("currency", Kind.ENUM, enum=Currency),
    Member("title", Kind.STRING),
    Member("externalReference", Kind.STRING, attr="external_reference"),
    Member("idempotencyKey", Kind.STRING, nullable=True, required=False, attr="idempotency_key"),
    Member("redirectUrl", Kind.STRING, attr="redirect_url"),
    Member("openInNewTab", Kind.BOOLEAN, required=False, attr="open_in_new_tab"),
    Member("allowCrypto", Kind.CONST, const=True, attr="allow_crypto"),
    Member("locale", Kind.STRING, required=False),
)

#: ``POST /sandbox/transactions/{id}/{action}``'s body.
SANDBOX_BODY: Tuple[Member, ...] = (
    Member("amount", Kind.DECIMAL, required=False),
    Member("network", Kind.STRING, required=False),
)

#: The sandbox actions that take an amount, and those that take none.
_SANDBOX_AMOUNT = {SandboxAction.PAY, SandboxAction.REFUND}


def query(members: Sequence[Member], **values: Any) -> Params:
    """Query pairs for the arguments that are not ``None``, in the declared order."""
    by_name = {member.name: member for member in members}
    for name in values:
        if name not in by_name:  # pragma: no cover - a bug in a resource method
            raise TypeError(f"{name!r} is not a parameter of this operation")
    pairs = []
    for member in members:
        value = values.get(member.name)
        if value is not None:
            pairs.append((member.name, _encode(member, value)))
    return pairs


def checkout_body(**values: Any) -> Dict[str, Any]:
    """The JSON body of a checkout session."""
    body: Dict[str, Any] = {}
    for member in CHECKOUT_OPTIONS:
        if member.has_const:
            body[member.name] = member.const
            continue
        value = values.get(member.attribute)
        if value is None:
            if member.required:
                raise TypeError(f"{member.attribute} is required")
            continue
        if member.kind is Kind.NUMBER_OR_STRING:
            body[member.name] = amount_text(value, member.attribute)
        elif member.kind is Kind.BOOLEAN:
            body[member.name] = _expect_bool(value, member.attribute)
        else:
            body[member.name] = _encode(member, value)
    return body


def sandbox_body(
    action: Union[SandboxAction, str], amount: Optional[AmountInput], network: Optional[str]
) -> Tuple[SandboxAction, Dict[str, str]]:
    """The action, checked, and its body: ``pay`` and ``refund`` need an amount, ``settle``
    may name a network, ``fail`` takes nothing."""
    try:
        act = SandboxAction(action)
    except ValueError:
        names = ", ".join(a.value for a in SandboxAction)
        raise ValueError(f"unknown sandbox action {action!r} (one of {names})") from None
    body: Dict[str, str] = {}
    if act in _SANDBOX_AMOUNT:
        if amount is None:
            raise TypeError(f"the {act.value} action needs an amount")
        body["amount"] = amount_text(amount, "amount")
    elif amount is not None:
        raise TypeError(f"the {act.value} action takes no amount")
    if network is not None:
        if act is not SandboxAction.SETTLE:
            raise TypeError(f"the {act.value} action takes no network")
        body["network"] = _expect_str(network, "network")
    return act, body


def amount_text(value: Any, name: str) -> str:
    """A decimal amount as the API reads it: plain digits, never an exponent."""
    if isinstance(value, bool) or isinstance(value, float):
        raise TypeError(f"{name}: give a Decimal, an int or decimal text, not a {type(value).__name__}")
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{name}: {value} is not an amount")
        return format(value, "f")
    if isinstance(value, int):
        return str(value)
    return _expect_str(value, name)


def time_bound(value: TimeBound, name: str) -> str:
    """A ``created_after`` / ``created_before`` value as the API reads it."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"{name}: a naive datetime names no instant; give it a tzinfo "
                "(datetime(..., tzinfo=timezone.utc))"
            )
        utc = value.astimezone(timezone.utc)
        text = utc.strftime("%Y-%m-%dT%H:%M:%S")
        if utc.microsecond:
            text += f".{utc.microsecond:06d}"
        return text + "Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected a datetime, a date, Unix seconds or text")
    if isinstance(value, int):
        try:
            moment = datetime.fromtimestamp(value, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            # Out of range: sent as it is, so that the API's error names the parameter.
            return str(value)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return _expect_str(value, name)


def _encode(member: Member, value: Any) -> str:
    name = member.attribute
    kind = member.kind
    if kind is Kind.INTEGER:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
        return str(value)
    if kind is Kind.STRING:
        return _expect_str(value, name)
    if kind is Kind.ENUM:
        if isinstance(value, Enum):
            return str(value.value)
        return _expect_str(value, name)
    if kind is Kind.TIMEBOUND:
        return time_bound(value, name)
    raise TypeError(f"{name}: {kind.value} is not sent")  # pragma: no cover


def _expect_str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a str, got {type(value).__name__}")
    return value


def _expect_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected a bool, got {type(value).__name__}")
    return value


def merge(pairs: Params, updates: Mapping[str, str]) -> Params:
    """``pairs`` with each name of ``updates`` set once (replaced where it was)."""
    kept = [(k, v) for k, v in pairs if k not in updates]
    return kept + list(updates.items())
