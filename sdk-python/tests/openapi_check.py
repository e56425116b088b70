"""Compares the library's declared wire shapes with ``edge-api/openapi.json``.

Every model (``__wire__``), list envelope, filter set and request body the library declares
is compared with the schema or operation of the document it stands for, in both directions:
member names, required-ness, nullability, JSON type, referenced models, constants and enum
values. :func:`problems` answers what differs, one line each; empty when they agree.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Type

from payrail import _params, models
from payrail._wire import Kind, Member, Model

#: Named schemas read as kinds of their own rather than followed.
SCALARS = {"Decimal": "decimal", "Timestamp": "timestamp", "TimeBound": "timebound"}

#: The models the library reads, each compared with ``components/schemas[__schema__]``.
MODELS: Tuple[Type[Model], ...] = (
    models.Amount,
    models.Networks,
    models.TxHashes,
    models.Transaction,
    models.Merchant,
    models.CheckoutSession,
    models.TokenResponse,
    models.ErrorBody,
    models.Event,
)

#: The list operations: path, the library's filters, the envelope schema.
LIST_OPERATIONS = (
    ("/v1/transactions", _params.TRANSACTION_FILTERS, "TransactionList"),
    ("/v1/merchants", _params.MERCHANT_FILTERS, "MerchantList"),
    ("/v1/events", _params.EVENT_FILTERS, "EventList"),
)

#: The reads that carry the bookmark (every list, and the merchant lookup).
BOOKMARKED_READS = ("/v1/transactions", "/v1/merchants", "/v1/events", "/v1/merchants/{id}")

Shape = Tuple[str, bool, Any]


class Document:
    """The OpenAPI document, with ``$ref`` resolution."""

    def __init__(self, document: Dict[str, Any]) -> None:
        self.raw = document

    def resolve(self, node: Dict[str, Any]) -> Dict[str, Any]:
        while "$ref" in node:
            target: Any = self.raw
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            node = target
        return node

    def schema(self, name: str) -> Dict[str, Any]:
        schema: Dict[str, Any] = self.raw["components"]["schemas"][name]
        return schema

    def shape(self, node: Dict[str, Any]) -> Shape:
        """(kind, nullable, detail) of a schema node."""
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name in SCALARS:
                return (SCALARS[name], False, None)
            target = self.resolve(node)
            if target.get("type") == "object" or "properties" in target:
                return ("object", False, name)
            return self.shape(target)
        for combinator in ("anyOf", "oneOf"):
            if combinator in node:
                options = node[combinator]
                rest = [o for o in options if o != {"type": "null"}]
                if len(rest) == 1 and len(options) == 2:
                    kind, _, detail = self.shape(rest[0])
                    return (kind, True, detail)
                return (combinator, False, tuple(self.shape(o) for o in options))
        if "const" in node:
            return ("const", False, node["const"])
        types = node.get("type")
        names = [types] if isinstance(types, str) else list(types or [])
        nullable = "null" in names
        names = sorted(n for n in names if n != "null")
        if "enum" in node:
            return ("enum", nullable, tuple(sorted(v for v in node["enum"] if v is not None)))
        kind = "|".join(names) or "any"
        if kind == "array":
            return ("array", nullable, self.shape(node["items"]))
        return (kind, nullable, None)

    def operation(self, path: str, method: str = "get") -> Dict[str, Any]:
        operation: Dict[str, Any] = self.raw["paths"][path][method]
        return operation

    def parameters(self, path: str, where: str, method: str = "get") -> Dict[str, Dict[str, Any]]:
        found = {}
        for parameter in self.operation(path, method).get("parameters", []):
            parameter = self.resolve(parameter)
            if parameter["in"] == where:
                found[parameter["name"]] = parameter
        return found


def library_shape(member: Member) -> Shape:
    """(kind, nullable, detail) of a library member, in the document's terms."""
    kind = member.kind
    if kind is Kind.CONST:
        return ("const", member.nullable, member.const)
    if kind is Kind.ENUM:
        assert member.enum is not None
        return ("enum", member.nullable, tuple(sorted(str(e.value) for e in member.enum)))
    if kind is Kind.OBJECT:
        assert member.model is not None
        return ("object", member.nullable, member.model.__schema__)
    if kind is Kind.ARRAY:
        assert member.model is not None
        return ("array", member.nullable, ("object", False, member.model.__schema__))
    return (kind.value, member.nullable, None)


def compare_members(
    where: str, ours: Sequence[Member], properties: Dict[str, Any], required: Iterable[str],
    doc: Document,
) -> List[str]:
    """What differs between the library's members and a schema's properties."""
    found: List[str] = []
    mine = {m.name: m for m in ours}
    required_set = set(required)
    for name in properties.keys() - mine.keys():
        found.append(f"{where}.{name}: in the document, not in the library")
    for name in mine.keys() - properties.keys():
        found.append(f"{where}.{name}: in the library, not in the document")
    for name in sorted(mine.keys() & properties.keys()):
        member = mine[name]
        if member.required != (name in required_set):
            found.append(
                f"{where}.{name}: required in the "
                f"{'library' if member.required else 'document'} only"
            )
        theirs = doc.shape(properties[name])
        if library_shape(member) != theirs:
            found.append(f"{where}.{name}: the library has {library_shape(member)}, the document {theirs}")
    return found


def compare_schema(name: str, ours: Sequence[Member], doc: Document) -> List[str]:
    try:
        schema = doc.resolve(doc.schema(name))
    except KeyError:
        return [f"{name}: no such schema in the document"]
    return compare_members(name, ours, schema.get("properties", {}), schema.get("required", []), doc)


def compare_enum(where: str, ours: Type[enum.Enum], values: Iterable[Any]) -> List[str]:
    mine = {str(e.value) for e in ours}
    theirs = {str(v) for v in values}
    if mine == theirs:
        return []
    return [
        f"{where}: the library has {sorted(mine - theirs)} more, the document {sorted(theirs - mine)} more"
    ]


def dataclass_problems(model: Type[Model]) -> List[str]:
    """Whether a model's dataclass fields are exactly the members it keeps."""
    kept = {m.attribute for m in model.__wire__ if m.keep}
    fields = {f.name for f in dataclasses.fields(model)}  # type: ignore[arg-type]
    if model is models.Event:
        # The envelope's data is a field of each event class, typed by its type.
        fields |= {"data"}
        for cls in (
            models.PaymentSucceeded,
            models.PaymentPaid,
            models.PaymentRefunded,
            models.WebhookTest,
            models.UnknownEvent,
        ):
            if {f.name for f in dataclasses.fields(cls)} != kept:
                return [f"{cls.__name__}: fields differ from the Event members"]
    if fields != kept:
        return [f"{model.__name__}: dataclass fields {sorted(fields)} but members {sorted(kept)}"]
    return []


def referenced_models(members: Iterable[Member], seen: Optional[Set[type]] = None) -> Set[type]:
    seen = set() if seen is None else seen
    for member in members:
        if member.model is not None and member.model not in seen:
            seen.add(member.model)
            referenced_models(member.model.__wire__, seen)
    return seen


def problems(document: Dict[str, Any]) -> List[str]:
    """Every difference between the library and the document."""
    doc = Document(document)
    found: List[str] = []

    # Models, and every model they reference is itself compared.
    for model in MODELS:
        found += compare_schema(model.__schema__, model.__wire__, doc)
        found += dataclass_problems(model)
    all_members = [m for model in MODELS for m in model.__wire__]
    all_members += [m for members in models.LISTS.values() for m in members]
    for model in referenced_models(all_members) - set(MODELS):
        found.append(f"{model.__name__}: referenced but not compared with the document")

    # List envelopes, filters and the bookmark header.
    for path, filters, envelope in LIST_OPERATIONS:
        found += compare_schema(envelope, models.LISTS[envelope], doc)
        operation = doc.operation(path)
        answer = operation["responses"]["200"]["content"]["application/json"]["schema"]
        if answer.get("$ref", "").rsplit("/", 1)[-1] != envelope:
            found.append(f"GET {path}: answers {answer}, the library reads {envelope}")
        query = doc.parameters(path, "query")
        found += compare_members(
            f"GET {path} query",
            filters,
            {name: p["schema"] for name, p in query.items()},
            [name for name, p in query.items() if p.get("required")],
            doc,
        )
    for path in BOOKMARKED_READS:
        if _params.BOOKMARK_HEADER not in doc.parameters(path, "header"):
            found.append(f"GET {path}: no {_params.BOOKMARK_HEADER} request header in the document")
        headers = doc.operation(path)["responses"]["200"].get("headers", {})
        if _params.BOOKMARK_HEADER not in headers:
            found.append(f"GET {path}: no {_params.BOOKMARK_HEADER} answer header in the document")

    # The request id the errors carry: if the document names one, it is the library's.
    names = set(doc.raw.get("components", {}).get("headers", {}))
    for operation in (op for item in doc.raw["paths"].values() for op in item.values()):
        if isinstance(operation, dict):
            for response in operation.get("responses", {}).values():
                names |= set(doc.resolve(response).get("headers", {}))
    for name in names:
        if "request-id" in name.lower() and name != _params.REQUEST_ID_HEADER:
            found.append(f"the document's request id header is {name}, the library reads {_params.REQUEST_ID_HEADER}")

    # Request bodies.
    found += compare_schema("CheckoutOptions", _params.CHECKOUT_OPTIONS, doc)
    sandbox = doc.operation("/sandbox/transactions/{id}/{action}", "post")
    body = doc.resolve(sandbox["requestBody"]["content"]["application/json"]["schema"])
    found += compare_members("sandbox body", _params.SANDBOX_BODY, body.get("properties", {}), body.get("required", []), doc)
    action = doc.parameters("/sandbox/transactions/{id}/{action}", "path", "post")["action"]
    found += compare_enum("sandbox action", models.SandboxAction, action["schema"]["enum"])

    # Scopes.
    scopes = doc.raw["components"]["securitySchemes"]["oauth2"]["flows"]["clientCredentials"]["scopes"]
    found += compare_enum("scopes", models.Scope, scopes)
    return found
