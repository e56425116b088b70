"""The library's models, enums, filters and request bodies agree with ``edge-api/openapi.json``
in both directions; and the comparison does fail when either side changes."""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any, Callable, Dict

import pytest

from payrail import _params, models
from payrail._wire import Kind, Member

from . import openapi_check

DOCUMENT = pathlib.Path(__file__).resolve().parents[2] / "edge-api" / "openapi.json"


@pytest.fixture(scope="module")
def document() -> Dict[str, Any]:
    loaded: Dict[str, Any] = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    return loaded


def test_the_library_agrees_with_the_document(document: Dict[str, Any]) -> None:
    assert openapi_check.problems(document) == []


def test_every_model_and_enum_is_compared() -> None:
    compared = {m.__schema__ for m in openapi_check.MODELS}
    assert compared == {
        "Amount", "Networks", "TxHashes", "Transaction", "Merchant", "CheckoutSession",
        "TokenResponse", "Error", "Event",
    }
    enums = set()
    members = [m for model in openapi_check.MODELS for m in model.__wire__]
    members += list(_params.TRANSACTION_FILTERS + _params.EVENT_FILTERS + _params.CHECKOUT_OPTIONS)
    for member in members:
        if member.enum is not None:
            enums.add(member.enum.__name__)
    assert enums == {
        "Status", "RawStatus", "AmountStatus", "MerchantStatus", "OnboardingStatus", "ErrorCode",
        "EventType", "FeedEventType", "Currency",
    }


Mutation = Callable[[Dict[str, Any]], None]


def schema(doc: Dict[str, Any], name: str) -> Dict[str, Any]:
    found: Dict[str, Any] = doc["components"]["schemas"][name]
    return found


def add_member(doc: Dict[str, Any]) -> None:
    transaction = schema(doc, "Transaction")
    transaction["properties"]["fee_currency"] = {"type": ["string", "null"]}
    transaction["required"].append("fee_currency")


def drop_member(doc: Dict[str, Any]) -> None:
    transaction = schema(doc, "Transaction")
    del transaction["properties"]["paid_at"]
    transaction["required"].remove("paid_at")


def make_nullable(doc: Dict[str, Any]) -> None:
    schema(doc, "Merchant")["properties"]["email"] = {"type": ["string", "null"]}


def make_optional(doc: Dict[str, Any]) -> None:
    schema(doc, "Transaction")["required"].remove("external_reference")


def add_status(doc: Dict[str, Any]) -> None:
    schema(doc, "Status")["enum"].append("disputed")


def drop_raw_status(doc: Dict[str, Any]) -> None:
    schema(doc, "RawStatus")["enum"].remove("expired")


def add_asset_enum(doc: Dict[str, Any]) -> None:
    schema(doc, "Transaction")["properties"]["asset"] = {
        "type": ["string", "null"], "enum": ["USDC", "USDT", "ETH", None],
    }


def retype_amount(doc: Dict[str, Any]) -> None:
    schema(doc, "Amount")["properties"]["gross"] = {"type": ["number", "null"]}


def add_filter(doc: Dict[str, Any]) -> None:
    doc["paths"]["/v1/transactions"]["get"]["parameters"].append(
        {"name": "currency", "in": "query", "required": False, "schema": {"type": "string"}}
    )


def add_event_type(doc: Dict[str, Any]) -> None:
    schema(doc, "Event")["properties"]["type"]["enum"].append("payment.disputed")


def add_error_code(doc: Dict[str, Any]) -> None:
    schema(doc, "Error")["properties"]["error"]["enum"].append("account_locked")


def add_scope(doc: Dict[str, Any]) -> None:
    doc["components"]["securitySchemes"]["oauth2"]["flows"]["clientCredentials"]["scopes"][
        "refunds:write"
    ] = "Refund"


def add_checkout_option(doc: Dict[str, Any]) -> None:
    schema(doc, "CheckoutOptions")["properties"]["customerEmail"] = {"type": "string"}


def add_currency(doc: Dict[str, Any]) -> None:
    schema(doc, "CheckoutOptions")["properties"]["currency"]["enum"].append("SEK")


def rename_bookmark(doc: Dict[str, Any]) -> None:
    doc["components"]["parameters"]["Bookmark"]["name"] = "Payrail-Session"


def name_request_id(doc: Dict[str, Any]) -> None:
    doc["components"]["headers"]["RequestId"] = {"schema": {"type": "string"}}
    headers = doc["paths"]["/v1/merchants"]["get"]["responses"]["200"]["headers"]
    headers["X-Request-Id"] = {"$ref": "#/components/headers/RequestId"}


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (add_member, "Transaction.fee_currency: in the document, not in the library"),
        (drop_member, "Transaction.paid_at: in the library, not in the document"),
        (make_nullable, "Merchant.email"),
        (make_optional, "Transaction.external_reference: required in the library only"),
        (add_status, "Transaction.status"),
        (add_status, "GET /v1/transactions query.status"),
        (drop_raw_status, "Transaction.raw_status"),
        (add_asset_enum, "Transaction.asset"),
        (retype_amount, "Amount.gross"),
        (add_filter, "GET /v1/transactions query.currency: in the document, not in the library"),
        (add_event_type, "Event.type"),
        (add_error_code, "Error.error"),
        (add_scope, "scopes"),
        (add_checkout_option, "CheckoutOptions.customerEmail"),
        (add_currency, "CheckoutOptions.currency"),
        (rename_bookmark, "no Payrail-Bookmark request header"),
        (name_request_id, "request id header is X-Request-Id"),
    ],
)
def test_a_change_to_the_document_is_caught(
    document: Dict[str, Any], mutate: Mutation, expected: str
) -> None:
    changed = copy.deepcopy(document)
    mutate(changed)
    found = openapi_check.problems(changed)
    assert any(expected in line for line in found), found


def test_a_change_to_the_library_is_caught(
    document: Dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    members = models.Amount.__wire__
    monkeypatch.setattr(models.Amount, "__wire__", members[:-1])
    assert any("Amount.bridge_fee: in the document" in p for p in openapi_check.problems(document))
    monkeypatch.setattr(
        models.Amount, "__wire__", members + (Member("tax", Kind.DECIMAL, nullable=True),)
    )
    found = openapi_check.problems(document)
    assert any("Amount.tax: in the library" in p for p in found)
    assert any("Amount: dataclass fields" in p for p in found)
    monkeypatch.setattr(models.Amount, "__wire__", members)
    filters = _params.MERCHANT_FILTERS
    monkeypatch.setattr(_params, "MERCHANT_FILTERS", filters[:-1])
    monkeypatch.setattr(
        openapi_check,
        "LIST_OPERATIONS",
        tuple(
            (path, _params.MERCHANT_FILTERS if path == "/v1/merchants" else f, envelope)
            for path, f, envelope in openapi_check.LIST_OPERATIONS
        ),
    )
    assert any("psp_reference_id: in the document" in p for p in openapi_check.problems(document))
