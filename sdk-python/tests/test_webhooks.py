"""Webhook verification against the signature vectors every Payrail library shares
(``shared-types/vectors/webhook-signatures.json``), and the typed events."""

from __future__ import annotations

import hashlib
import hmac
import json
import pathlib
from typing import Any, Callable, Dict, List, Optional

import pytest

import payrail
from payrail import webhooks

from .scripted import transaction

VECTORS_FILE = (
    pathlib.Path(__file__).resolve().parents[2] / "shared-types" / "vectors" / "webhook-signatures.json"
)

#: What each vector's ``result`` must be: ``ok``, or the reason of the refusal.
RESULTS = {"ok", "malformed_header", "timestamp_out_of_tolerance", "no_matching_signature"}

Verify = Callable[[Dict[str, Any]], str]


def vectors() -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads(VECTORS_FILE.read_text(encoding="utf-8"))
    return data


def library_verdict(vector: Dict[str, Any]) -> str:
    """What :class:`payrail.Webhook` answers to a vector: ``ok`` or the refusal's reason."""
    webhook = payrail.Webhook(
        vector["secrets"], tolerance=vector.get("tolerance", webhooks.DEFAULT_TOLERANCE)
    )
    try:
        event = webhook.verify(vector["body"].encode("utf-8"), vector["header"], now=vector["now"])
    except payrail.WebhookVerificationError as refused:
        return refused.reason
    assert event.id == json.loads(vector["body"])["id"], vector["name"]
    return "ok"


def mismatches(verify: Verify) -> List[str]:
    """The vectors whose verdict under ``verify`` is not the pinned one."""
    wrong = []
    for vector in vectors()["verify"]:
        assert vector["result"] in RESULTS, vector["name"]
        got = verify(vector)
        if got != vector["result"]:
            wrong.append(f"{vector['name']}: want {vector['result']}, got {got}")
    return wrong


def test_signing_gives_the_pinned_signatures() -> None:
    signed = vectors()["sign"]
    assert signed
    for vector in signed:
        body = vector["body"].encode("utf-8")
        assert payrail.sign(vector["secret"], vector["timestamp"], body) == vector["signature"]
        assert payrail.sign(vector["secret"], vector["timestamp"], vector["body"]) == vector["signature"]


def test_every_verify_vector_gives_its_pinned_answer() -> None:
    assert mismatches(library_verdict) == []
    results = [v["result"] for v in vectors()["verify"]]
    # The file exercises acceptance and each refusal.
    assert set(results) == RESULTS


def _naive(vector: Dict[str, Any], *, upper: bool = False, window: bool = True) -> str:
    """A plausible but wrong verifier, to show that the vectors catch each mistake."""
    header = vector["header"]
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p) if header else {}
    if "t" not in parts or "v1" not in parts or not parts["t"].isdigit():
        return "malformed_header"
    t = int(parts["t"])
    if window and abs(vector["now"] - t) > vector.get("tolerance", 300):
        return "timestamp_out_of_tolerance"
    for secret in vector["secrets"]:
        digest = hmac.new(secret.encode(), f"{t}.".encode() + vector["body"].encode(), hashlib.sha256)
        expected = digest.hexdigest()
        candidate = parts["v1"].lower() if upper else parts["v1"]
        if hmac.compare_digest(candidate, expected):
            return "ok"
    return "no_matching_signature"


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(lambda v: _naive(v), id="last v1 only, no trimming, parts without '=' skipped"),
        pytest.param(lambda v: _naive(v, upper=True), id="case-insensitive hex"),
        pytest.param(lambda v: _naive(v, window=False), id="no replay window"),
        pytest.param(lambda v: "ok", id="accepts everything"),
    ],
)
def test_the_vectors_catch_a_wrong_verifier(broken: Verify) -> None:
    assert mismatches(broken) != []


BODY = json.dumps(
    {"id": "evt_7", "type": "payment.paid", "created": 1795000000, "data": transaction(7)}
).encode()


def body_of(kind: str, data: Optional[Any] = None) -> bytes:
    value = json.loads(BODY)
    value["type"] = kind
    if data is not None:
        value["data"] = data
    return json.dumps(value).encode()


@pytest.mark.parametrize(
    ("kind", "cls"),
    [
        ("payment.succeeded", payrail.PaymentSucceeded),
        ("payment.paid", payrail.PaymentPaid),
        ("payment.refunded", payrail.PaymentRefunded),
        ("webhook.test", payrail.WebhookTest),
    ],
)
def test_each_known_type_is_its_class(kind: str, cls: type) -> None:
    body = body_of(kind)
    header = payrail.signature_header("whsec_a", 1000, body)
    event = payrail.Webhook("whsec_a").verify(body, header, now=1000)
    assert type(event) is cls
    assert event.type == kind and isinstance(event.type, payrail.EventType)
    assert event.transaction is not None and event.transaction.external_reference == "order-7"
    assert str(event.transaction.amount.gross) == "40.00"
    assert event.created_at.year == 2026


def test_a_type_newer_than_the_library_is_kept() -> None:
    body = body_of("payout.created", {"x": [1, 2]})
    event = payrail.Webhook("whsec_a").verify(body, payrail.signature_header("whsec_a", 5, body), now=5)
    assert isinstance(event, payrail.UnknownEvent)
    assert (event.type, event.data, event.transaction) == ("payout.created", {"x": [1, 2]}, None)


def test_a_signed_body_that_is_not_an_event_is_a_decode_error() -> None:
    webhook = payrail.Webhook("whsec_a")
    for body in (b"not json", body_of("payment.paid", {"x": 1}), b"[]"):
        with pytest.raises(payrail.DecodeError):
            webhook.verify(body, payrail.signature_header("whsec_a", 5, body), now=5)


def test_refusals_have_their_reason() -> None:
    webhook = payrail.Webhook(["whsec_old", "whsec_new"])
    header = payrail.signature_header("whsec_new", 1000, BODY)
    assert webhook.verify(BODY, header, now=1000).id == "evt_7"
    cases = [
        (BODY + b" ", header, 1000, "no_matching_signature"),
        (BODY, payrail.signature_header("whsec_other", 1000, BODY), 1000, "no_matching_signature"),
        (BODY, header, 1000 + 301, "timestamp_out_of_tolerance"),
        (BODY, header, 1000 - 301, "timestamp_out_of_tolerance"),
        (BODY, None, 1000, "malformed_header"),
        (BODY, "t=1000,v1", 1000, "malformed_header"),
        (BODY, "t=1000, v1=" + "0" * 64 + ",t=x", 1000, "malformed_header"),
        (BODY, f"t={2**63},v1=00", 1000, "malformed_header"),
        (BODY, "t=1_000,v1=00", 1000, "malformed_header"),
        (BODY, "t= 1000,v1=00", 1000, "malformed_header"),
    ]
    for body, signature, now, reason in cases:
        with pytest.raises(payrail.WebhookVerificationError) as refused:
            webhook.verify(body, signature, now=now)
        assert refused.value.reason == reason, (signature, now)
    # A sign and a leading "+" read as Rust reads an i64; the header's other schemes are ignored.
    plus = header.replace("t=1000", "t=+1000") + ",v2=abc"
    assert webhook.verify(BODY, plus, now=1000).id == "evt_7"


def test_the_system_clock_is_the_default() -> None:
    import time

    now = int(time.time())
    header = payrail.signature_header("whsec_a", now, BODY)
    assert payrail.Webhook("whsec_a").verify(BODY, header).id == "evt_7"
    stale = payrail.signature_header("whsec_a", now - 3600, BODY)
    with pytest.raises(payrail.WebhookVerificationError):
        payrail.Webhook("whsec_a").verify(BODY, stale)
    assert payrail.Webhook("whsec_a", tolerance=7200).verify(BODY, stale).id == "evt_7"


def test_a_parsed_body_is_refused_with_the_way_to_get_the_raw_one() -> None:
    with pytest.raises(TypeError, match="raw request body"):
        payrail.Webhook("whsec_a").verify(json.loads(BODY), "t=1,v1=00")


def test_the_secrets_stay_out_of_repr_and_errors() -> None:
    webhook = payrail.Webhook(["whsec_old_secret", "whsec_new_secret"])
    assert repr(webhook) == "Webhook(secrets=<2 redacted>, tolerance=300)"
    with pytest.raises(payrail.WebhookVerificationError) as refused:
        webhook.verify(BODY, "t=1,v1=00", now=1)
    assert "whsec" not in str(refused.value) + repr(refused.value)
    for bad in ([], [""], ""):
        with pytest.raises(ValueError):
            payrail.Webhook(bad)
    for wrong in (7, b"whsec_a", [b"whsec_a"]):
        with pytest.raises((TypeError, ValueError)):
            payrail.Webhook(wrong)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        payrail.Webhook("whsec_a", tolerance=-1)


def test_errors_survive_pickling() -> None:
    import pickle

    for err in (
        payrail.WebhookVerificationError("no_matching_signature"),
        payrail.RateLimitError(429, "rate_limited", "slow", request_id="req_1", retry_after=3.0),
        payrail.DecodeError("broken", status=200, request_id="req_2"),
    ):
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is type(err) and str(again) == str(err)
        assert vars(again) == vars(err)
