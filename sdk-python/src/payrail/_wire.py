"""The wire shape of the models, declared once, and the decoder that reads JSON by it.

Each model class lists its JSON members as :class:`Member` values (``__wire__``) and names the
OpenAPI schema it stands for (``__schema__``). The decoder reads answers by that list and
nothing else, and the conformance test compares the same list with ``edge-api/openapi.json``
in both directions, so a member cannot be decoded without being checked against the document.

Reading is tolerant where the contract lets the API grow (docs/API.md, "Versioning"): members
this version does not know are ignored, and an enum value it does not know is kept as the
plain string. It is strict where the contract is firm: a required member missing, a value of
the wrong JSON type, an amount that is not a decimal string or a time that does not parse is a
:class:`~payrail.errors.DecodeError` naming the member (never its value, which may be a
customer's data).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar, Dict, Optional, Sequence, Tuple, Type, TypeVar

from .errors import DecodeError


class Kind(enum.Enum):
    """What a member holds, in the document's terms."""

    STRING = "string"
    INTEGER = "integer"
    BOOLEAN = "boolean"
    #: A decimal amount as a string (the document's ``Decimal``), read as :class:`Decimal`.
    DECIMAL = "decimal"
    #: A UTC time as a string (the document's ``Timestamp``), read as an aware ``datetime``.
    TIMESTAMP = "timestamp"
    #: A time bound of a filter (the document's ``TimeBound``); only ever sent.
    TIMEBOUND = "timebound"
    #: A string of a closed set, read as the ``enum`` class (or kept as text when unknown).
    ENUM = "enum"
    #: An object described by ``model``.
    OBJECT = "object"
    #: An array of ``model`` objects, read as a tuple.
    ARRAY = "array"
    #: One fixed value (``const``).
    CONST = "const"
    #: A JSON number or a decimal string (a checkout amount); only ever sent, as a string.
    NUMBER_OR_STRING = "number|string"
    #: Any JSON, kept as parsed (the data of an event type this version does not know).
    ANY = "any"


_NO_CONST: Any = object()


@dataclass(frozen=True)
class Member:
    """One JSON member of a model: its wire name, what it holds, and where it goes."""

    name: str
    kind: Kind
    nullable: bool = False
    required: bool = True
    enum: Optional[Type[enum.Enum]] = None
    model: Optional[Type[Any]] = None
    const: Any = _NO_CONST
    #: The Python attribute it is read into (``None``: the wire name); see ``keep``.
    attr: Optional[str] = None
    #: Whether the value is kept on the model; a constant tag such as ``object`` is only
    #: checked.
    keep: bool = True

    @property
    def attribute(self) -> str:
        return self.attr or self.name

    @property
    def has_const(self) -> bool:
        return self.const is not _NO_CONST


class StrEnum(str, enum.Enum):
    """A string enum whose ``str()`` is its wire value (as in Python 3.11's ``StrEnum``)."""

    def __str__(self) -> str:
        return str(self.value)


class Model:
    """A model read from the wire by its ``__wire__`` description."""

    __wire__: ClassVar[Tuple[Member, ...]] = ()
    #: The name of the schema in ``edge-api/openapi.json`` (``components/schemas``).
    __schema__: ClassVar[str] = ""

    @classmethod
    def _from_wire(cls: Type[M], value: Any, where: str) -> M:
        return cls(**decode_members(cls.__wire__, value, where))


M = TypeVar("M", bound=Model)

DECIMAL_PATTERN = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def decode_members(members: Sequence[Member], value: Any, where: str) -> Dict[str, Any]:
    """The attributes of an object read by ``members``: unknown members are ignored, a missing
    nullable one reads as ``None``, a missing required one is a ``DecodeError``."""
    if not isinstance(value, dict):
        raise DecodeError(f"{where}: expected an object, got {_json_type(value)}")
    attributes: Dict[str, Any] = {}
    for member in members:
        path = f"{where}.{member.name}"
        if member.name in value:
            decoded = decode_value(member, value[member.name], path)
        elif member.nullable or not member.required:
            decoded = None
        else:
            raise DecodeError(f"{path} is missing")
        if member.keep:
            attributes[member.attribute] = decoded
    return attributes


def decode_value(member: Member, raw: Any, where: str) -> Any:
    """One member's value, checked against its description."""
    if raw is None:
        if member.nullable:
            return None
        raise DecodeError(f"{where} is null")
    kind = member.kind
    if kind is Kind.CONST:
        if member.keep and isinstance(raw, type(member.const)):
            return raw
        if raw != member.const:
            raise DecodeError(f"{where}: expected {member.const!r}")
        return raw
    if kind is Kind.STRING:
        return _expect(raw, str, "a string", where)
    if kind is Kind.INTEGER:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise DecodeError(f"{where}: expected an integer, got {_json_type(raw)}")
        return raw
    if kind is Kind.BOOLEAN:
        return _expect(raw, bool, "a boolean", where)
    if kind is Kind.DECIMAL:
        text = _expect(raw, str, "a decimal string", where)
        if not DECIMAL_PATTERN.fullmatch(text):
            raise DecodeError(f"{where}: expected a decimal string such as \"12.50\"")
        try:
            return Decimal(text)
        except InvalidOperation:  # pragma: no cover - the pattern admits only valid text
            raise DecodeError(f"{where}: expected a decimal string") from None
    if kind is Kind.TIMESTAMP:
        return parse_timestamp(_expect(raw, str, "a date-time string", where), where)
    if kind is Kind.ENUM:
        assert member.enum is not None
        text = _expect(raw, str, "a string", where)
        try:
            return member.enum(text)
        except ValueError:
            # A value newer than this version of the library: kept, not refused.
            return text
    if kind is Kind.OBJECT:
        assert member.model is not None
        return member.model._from_wire(raw, where)
    if kind is Kind.ARRAY:
        assert member.model is not None
        if not isinstance(raw, list):
            raise DecodeError(f"{where}: expected an array, got {_json_type(raw)}")
        model = member.model
        return tuple(model._from_wire(item, f"{where}[{i}]") for i, item in enumerate(raw))
    if kind is Kind.ANY:
        return raw
    raise DecodeError(f"{where}: {kind.value} is not read from answers")


def parse_timestamp(text: str, where: str) -> datetime:
    """An aware UTC ``datetime`` from the API's ``2026-11-21T04:35:27Z`` (any ISO 8601
    date-time with an offset is taken; one without is read as UTC, as the API writes UTC)."""
    iso = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        raise DecodeError(f"{where}: expected a date-time such as 2026-11-21T04:35:27Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def _expect(raw: Any, kind: Type[Any], what: str, where: str) -> Any:
    if not isinstance(raw, kind):
        raise DecodeError(f"{where}: expected {what}, got {_json_type(raw)}")
    return raw


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
