"""The library against the real worker (``wrangler dev``, local D1, demo data).

Run by ``tests/tests/it/partner_tools/libraries.rs``, which starts the worker, makes the
credentials and a webhook endpoint, and runs this file from the repository root with them in
the environment (see :data:`REQUIRED`)::

    .cache/python-sdk/bin/python -m pytest -q sdk-python/blackbox

Covers the token; every filter of the transactions list; merchants and events; pagination to
the end checked against a raw walk; the bookmark carried; 403 for a missing scope; 401 after
the secret is rotated; typed errors; and a webhook the worker delivers to a receiver here,
verified by the library. Both the sync and the async client are exercised.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import httpx
import pytest

import payrail

REQUIRED = (
    "PAYRAIL_API_URL",
    "PAYRAIL_CLIENT_ID",
    "PAYRAIL_CLIENT_SECRET",
    "PAYRAIL_NARROW_CLIENT_ID",
    "PAYRAIL_NARROW_CLIENT_SECRET",
    "PAYRAIL_ROTATE_CLIENT_ID",
    "PAYRAIL_ROTATE_CLIENT_SECRET",
    "PAYRAIL_PORTAL_COOKIE",
    "PAYRAIL_PORTAL_CSRF",
    "PAYRAIL_PUBLISHABLE_KEY",
    "PAYRAIL_WEBHOOK_PORT",
    "PAYRAIL_WEBHOOK_SECRET",
)

#: The shape of a Payrail-Request-Id.
REQUEST_ID = re.compile(r"req_[0-9a-f]{24}")

#: How long a webhook may take to arrive.
DELIVERY_DEADLINE = 60.0


@pytest.fixture(scope="session")
def env() -> Dict[str, str]:
    missing = [name for name in REQUIRED if not os.environ.get(name)]
    if missing:
        # Not a skip: a run without the worker must not pass for a run that tested it.
        pytest.exit(
            "the black-box tests need a running worker and its credentials; missing "
            f"{', '.join(missing)}. Run them through the harness: cargo test -p payrail-tests "
            "--test it partner_tools::libraries",
            returncode=1,
        )
    return {name: os.environ[name] for name in REQUIRED}


@pytest.fixture(scope="session")
def start() -> datetime:
    """A moment before the tests began: lists bounded by it (``created_before``) are stable
    while the tests, and others, create payments."""
    return datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=1)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def client(env: Dict[str, str], prefix: str = "PAYRAIL", **options: Any) -> payrail.Client:
    return payrail.Client(
        env["PAYRAIL_API_URL"], env[f"{prefix}_CLIENT_ID"], env[f"{prefix}_CLIENT_SECRET"], **options
    )


def async_client(env: Dict[str, str], prefix: str = "PAYRAIL", **options: Any) -> payrail.AsyncClient:
    return payrail.AsyncClient(
        env["PAYRAIL_API_URL"], env[f"{prefix}_CLIENT_ID"], env[f"{prefix}_CLIENT_SECRET"], **options
    )


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def raw_walk(env: Dict[str, str], token: str, path: str, params: Dict[str, str]) -> Tuple[List[int], int]:
    """Every id of a list, paged by hand over plain HTTP, and how many pages it took."""
    ids: List[int] = []
    pages = 0
    cursor: Optional[int] = None
    with httpx.Client(base_url=env["PAYRAIL_API_URL"], timeout=30) as http:
        while True:
            query = dict(params)
            if cursor is not None:
                query["starting_after"] = str(cursor)
            answer = http.get(path, params=query, headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 200, answer.text
            body = answer.json()
            pages += 1
            ids += [item["id"] for item in body["data"]]
            if not body["has_more"]:
                return ids, pages
            cursor = body["next_cursor"]


@dataclass
class Exchange:
    """One request of the library and its answer, as httpx's event hooks saw them."""

    method: str
    path: str
    bookmark_sent: Optional[str]
    status: int = 0
    headers: Dict[str, str] = field(default_factory=dict)


class Recorder:
    """Event hooks that record what the library sends and receives."""

    def __init__(self) -> None:
        self.exchanges: List[Exchange] = []

    def on_request(self, request: httpx.Request) -> None:
        self.exchanges.append(
            Exchange(request.method, request.url.path, request.headers.get("Payrail-Bookmark"))
        )

    def on_response(self, response: httpx.Response) -> None:
        self.exchanges[-1].status = response.status_code
        self.exchanges[-1].headers = dict(response.headers)

    async def on_request_async(self, request: httpx.Request) -> None:
        self.on_request(request)

    async def on_response_async(self, response: httpx.Response) -> None:
        self.on_response(response)

    def sync_http(self) -> httpx.Client:
        return httpx.Client(event_hooks={"request": [self.on_request], "response": [self.on_response]})

    def async_http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            event_hooks={"request": [self.on_request_async], "response": [self.on_response_async]}
        )

    def steps(self) -> List[Tuple[str, str, int]]:
        return [(e.method, e.path, e.status) for e in self.exchanges]


# --- The token ---------------------------------------------------------------------------------


def test_the_token_is_issued_and_cached(env: Dict[str, str]) -> None:
    with client(env) as sync:
        token = sync.access_token()
        assert token.startswith("prt_")
        assert sync.access_token() == token
        assert token not in repr(sync) and env["PAYRAIL_CLIENT_SECRET"] not in repr(sync)
        # The token works for plain HTTP too.
        answer = httpx.get(
            f"{env['PAYRAIL_API_URL']}/v1/transactions?limit=1",
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answer.status_code == 200
    narrowed = client(env, scope=[payrail.Scope.TRANSACTIONS_READ])
    with narrowed, pytest.raises(payrail.PermissionDeniedError):
        narrowed.merchants.page()


@pytest.mark.anyio
async def test_the_async_client_shares_one_token_between_tasks(env: Dict[str, str]) -> None:
    import asyncio

    recorder = Recorder()
    async with recorder.async_http() as http:
        async with async_client(env, http_client=http) as api:
            pages = await asyncio.gather(*(api.transactions.page(limit=2) for _ in range(6)))
    assert all(len(page) == 2 for page in pages)
    assert [e.path for e in recorder.exchanges].count("/oauth/token") == 1


# --- Transactions ------------------------------------------------------------------------------


def test_every_transaction_filter_selects_what_it_names(env: Dict[str, str], start: datetime) -> None:
    with client(env) as api:
        every = list(api.transactions.list(created_before=start, limit=100))
        assert len(every) > 100, "Northwind's demo data spans more than one page"
        assert all(t.created_at is not None and t.created_at < start for t in every)
        by_id = {t.id: t for t in every}

        def ids(**filters: Any) -> Set[int]:
            return {t.id for t in api.transactions.list(created_before=start, limit=100, **filters)}

        # status: every value of the contract; each result has it, and raw_status maps onto it.
        raw_for = {
            payrail.Status.PENDING: {"pending"},
            payrail.Status.PAID: {"succeeded", "paid"},
            payrail.Status.FAILED: {"failed", "expired"},
            payrail.Status.REFUNDED: {"refunded"},
            payrail.Status.PARTIALLY_REFUNDED: {"partially_refunded"},
        }
        seen_statuses = set()
        for status in payrail.Status:
            page = api.transactions.page(status=status, limit=100, created_before=start)
            assert all(t.status is status and t.raw_status in raw_for[status] for t in page), status
            if page.data:
                seen_statuses.add(status)
        assert payrail.Status.PAID in seen_statuses and len(seen_statuses) >= 2

        # Values are taken from the oldest transactions (demo data): tests running alongside
        # change only the payments they make.
        # merchant_id: exactly that merchant's transactions.
        merchant_id = every[-1].merchant_id
        assert ids(merchant_id=merchant_id) == {t.id for t in every if t.merchant_id == merchant_id}

        # status and merchant together (AND).
        both = list(api.transactions.list(status="paid", merchant_id=merchant_id, created_before=start))
        assert both and all(t.status == "paid" and t.merchant_id == merchant_id for t in both)

        # external_reference: exactly the transactions of that order.
        referenced = next(t for t in reversed(every) if t.external_reference)
        reference = referenced.external_reference
        assert reference is not None
        assert ids(external_reference=reference) == {
            t.id for t in every if t.external_reference == reference
        }

        # id: one transaction, the same as in the list; retrieve answers it, or None.
        one = api.transactions.page(id=referenced.id)
        assert [t.id for t in one] == [referenced.id] and one.has_more is False
        retrieved = api.transactions.retrieve(referenced.id)
        assert retrieved is not None
        assert (retrieved.id, retrieved.external_reference, retrieved.created_at) == (
            referenced.id,
            reference,
            by_id[referenced.id].created_at,
        )
        assert api.transactions.retrieve(9_007_199_254_740_991) is None

        # created_after (inclusive) and created_before (exclusive), around a time in the middle.
        middle = every[len(every) // 2].created_at
        assert middle is not None
        after = ids(created_after=middle)
        before = {t.id for t in api.transactions.list(created_before=middle, limit=100)}
        assert after == {t.id for t in every if t.created_at is not None and t.created_at >= middle}
        assert before == {t.id for t in every if t.created_at is not None and t.created_at < middle}
        assert after and before and not after & before
        # The same bounds as text, as a date and as Unix seconds.
        assert ids(created_after=iso(middle)) == after
        assert ids(created_after=int(middle.timestamp())) == after
        day = middle.date()
        on_or_after_day = ids(created_after=day)
        assert on_or_after_day == {
            t.id for t in every if t.created_at is not None and t.created_at.date() >= day
        }

        # limit and starting_after: a page of that size, and the next one after its cursor.
        first = api.transactions.page(limit=7, created_before=start)
        assert len(first) == 7 and first.has_more and first.next_cursor == first.data[-1].id
        second = api.transactions.page(limit=7, created_before=start, starting_after=first.next_cursor)
        assert [t.id for t in first] + [t.id for t in second] == [t.id for t in every[:14]]

        # Typed values.
        sample = by_id[referenced.id]
        assert isinstance(sample.amount.expected, Decimal)
        assert sample.created_at is not None and sample.created_at.tzinfo is not None


def test_pagination_to_the_end_matches_a_raw_walk(env: Dict[str, str], start: datetime) -> None:
    with client(env) as api:
        listed = [t.id for t in api.transactions.list(limit=100, created_before=start)]
        raw, pages = raw_walk(
            env, api.access_token(), "/v1/transactions", {"limit": "100", "created_before": iso(start)}
        )
    assert pages > 1
    assert listed == raw
    assert listed == sorted(listed, reverse=True) and len(set(listed)) == len(listed)


@pytest.mark.anyio
async def test_async_pagination_to_the_end_matches_a_raw_walk(
    env: Dict[str, str], start: datetime
) -> None:
    async with async_client(env) as api:
        listed = [t.id async for t in api.transactions.list(limit=100, created_before=start)]
        token = await api.access_token()
        merchants = [m.id async for m in api.merchants.list(limit=2)]
    raw, pages = raw_walk(env, token, "/v1/transactions", {"limit": "100", "created_before": iso(start)})
    assert pages > 1 and listed == raw
    raw_merchants, merchant_pages = raw_walk(env, token, "/v1/merchants", {"limit": "2"})
    assert merchant_pages > 1 and merchants == raw_merchants


def test_the_quick_start_example_lists_todays_paid_transactions(env: Dict[str, str]) -> None:
    example = pathlib.Path(__file__).resolve().parents[1] / "examples" / "paid_today.py"
    source = str(example.parents[1] / "src")
    variables = dict(os.environ, PYTHONPATH=source)
    variables.update(
        {name: env[name] for name in ("PAYRAIL_API_URL", "PAYRAIL_CLIENT_ID", "PAYRAIL_CLIENT_SECRET")}
    )
    ran = subprocess.run(
        [sys.executable, str(example)], env=variables, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert re.fullmatch(r"\d+ paid today", lines[-1]), ran.stdout
    assert len(lines) - 1 == int(lines[-1].split()[0])


# --- Merchants ---------------------------------------------------------------------------------


def test_merchants_by_list_id_and_reference(env: Dict[str, str]) -> None:
    with client(env) as api:
        merchants = list(api.merchants.list(limit=100))
        assert merchants
        assert [m.id for m in api.merchants.list(limit=1)] == [m.id for m in merchants]
        for merchant in merchants:
            assert merchant.public_key.startswith("pk_")
            assert merchant.onboarding_complete == (merchant.onboarding_status == "completed")
            assert api.merchants.retrieve(merchant.id) == merchant
            by_reference = list(api.merchants.list(psp_reference_id=merchant.psp_reference_id))
            assert merchant in by_reference
            assert all(m.psp_reference_id == merchant.psp_reference_id for m in by_reference)
            assert list(api.merchants.list(id=merchant.id)) == [merchant]
        assert api.merchants.retrieve(9_007_199_254_740_991) is None
        assert list(api.merchants.list(psp_reference_id="no-such-reference-" + uuid.uuid4().hex)) == []
        # Only the institution's merchants: every transaction's merchant is one of them.
        own = {m.id for m in merchants}
        assert {t.merchant_id for t in api.transactions.page(limit=100)} <= own


# --- The bookmark ------------------------------------------------------------------------------


def carried(exchanges: List[Exchange]) -> List[Tuple[Optional[str], Optional[str]]]:
    """(the bookmark each read sent, the last bookmark answered before it)."""
    pairs = []
    last: Optional[str] = None
    for exchange in exchanges:
        if exchange.method == "GET":
            pairs.append((exchange.bookmark_sent, last))
        last = exchange.headers.get("payrail-bookmark", last)
    return pairs


def test_the_bookmark_is_carried_to_the_next_read(env: Dict[str, str]) -> None:
    recorder = Recorder()
    with recorder.sync_http() as http, client(env, http_client=http) as api:
        api.transactions.page(limit=3)
        api.merchants.page(limit=3)
        list(api.transactions.list(limit=100))
        api.events.page(limit=3)
        assert api.bookmark is not None
    answered = [e.headers.get("payrail-bookmark") for e in recorder.exchanges if e.method == "GET"]
    assert all(answered), "every read answers a Payrail-Bookmark"
    pairs = carried(recorder.exchanges)
    assert pairs[0] == (None, None)
    assert len(pairs) > 3 and all(sent == last for sent, last in pairs)


@pytest.mark.anyio
async def test_the_async_client_carries_the_bookmark_too(env: Dict[str, str]) -> None:
    recorder = Recorder()
    async with recorder.async_http() as http, async_client(env, http_client=http) as api:
        await api.transactions.page(limit=1)
        await api.merchants.page(limit=1)
        await api.events.page(limit=1)
    pairs = carried(recorder.exchanges)
    assert len(pairs) == 3 and pairs[1][0] is not None
    assert all(sent == last for sent, last in pairs)


# --- Errors ------------------------------------------------------------------------------------


def test_a_missing_scope_is_403_insufficient_scope(env: Dict[str, str]) -> None:
    with client(env, "PAYRAIL_NARROW") as narrow:
        assert narrow.transactions.page(limit=1) is not None
        for call in (narrow.merchants.page, narrow.events.page):
            with pytest.raises(payrail.PermissionDeniedError) as denied:
                call()
            assert (denied.value.status, denied.value.code) == (403, "insufficient_scope")


@pytest.mark.anyio
async def test_a_missing_scope_is_403_for_the_async_client(env: Dict[str, str]) -> None:
    async with async_client(env, "PAYRAIL_NARROW") as narrow:
        with pytest.raises(payrail.PermissionDeniedError) as denied:
            await narrow.merchants.retrieve(1)
        assert denied.value.code == payrail.ErrorCode.INSUFFICIENT_SCOPE


def test_a_bad_filter_is_a_typed_400_naming_it(env: Dict[str, str]) -> None:
    recorder = Recorder()
    with recorder.sync_http() as http, client(env, http_client=http) as api:
        with pytest.raises(payrail.InvalidRequestError) as refused:
            api.transactions.page(created_after="yesterday")
        err = refused.value
        assert (err.status, err.code) == (400, "invalid_request")
        assert "created_after" in err.description
        # The request id is the one the answer carried (docs/API.md: req_ and 24 hex digits).
        answered = recorder.exchanges[-1].headers.get("payrail-request-id")
        assert answered is not None and REQUEST_ID.fullmatch(answered), answered
        assert err.request_id == answered and answered in str(err)
        with pytest.raises(payrail.InvalidRequestError, match="limit"):
            api.transactions.page(limit=1000)
        with pytest.raises(payrail.InvalidRequestError, match="status"):
            api.transactions.page(status="settled")
    # Only one request each: a 400 is never retried.
    assert [s for s in recorder.steps() if s[1] == "/v1/transactions"] == [
        ("GET", "/v1/transactions", 400)
    ] * 3


@pytest.mark.anyio
async def test_a_bad_filter_is_a_typed_400_for_the_async_client(env: Dict[str, str]) -> None:
    async with async_client(env) as api:
        with pytest.raises(payrail.InvalidRequestError) as refused:
            await api.events.page(type="payment.exploded")
        assert refused.value.code == "invalid_request" and "type" in refused.value.description


class Rotation:
    """The rotation client's current secret, as the tests rotate it."""

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def env(self, env: Dict[str, str]) -> Dict[str, str]:
        return dict(env, PAYRAIL_ROTATE_CLIENT_SECRET=self.secret)


@pytest.fixture(scope="session")
def rotation(env: Dict[str, str]) -> Rotation:
    return Rotation(env["PAYRAIL_ROTATE_CLIENT_SECRET"])


def rotate(env: Dict[str, str]) -> str:
    """Rotates the rotation client's secret in the portal; answers the new one."""
    answer = httpx.post(
        f"{env['PAYRAIL_API_URL']}/portal/api/clients/{env['PAYRAIL_ROTATE_CLIENT_ID']}/rotate",
        headers={
            "Cookie": f"payrail_portal={env['PAYRAIL_PORTAL_COOKIE']}",
            "X-CSRF-Token": env["PAYRAIL_PORTAL_CSRF"],
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    secret: str = answer.json()["client_secret"]
    assert secret.startswith("sk_live_")
    return secret


def test_a_rotated_secret_is_401_then_the_new_one_works(
    env: Dict[str, str], rotation: Rotation
) -> None:
    recorder = Recorder()
    old_secret = rotation.secret
    with recorder.sync_http() as http, client(
        rotation.env(env), "PAYRAIL_ROTATE", http_client=http
    ) as old:
        assert old.transactions.page(limit=1).data
        new_secret = rotation.secret = rotate(env)
        with pytest.raises(payrail.AuthenticationError) as refused:
            old.transactions.page(limit=1)
        err = refused.value
        assert (err.status, err.code) == (401, "invalid_client")
        assert err.request_id is not None and REQUEST_ID.fullmatch(err.request_id)
        assert err.request_id == recorder.exchanges[-1].headers.get("payrail-request-id")
        assert old_secret not in str(err) + repr(err)
    # The cached token was refused, one new token was asked for with the old secret, and that
    # was refused: nothing more.
    assert recorder.steps() == [
        ("POST", "/oauth/token", 200),
        ("GET", "/v1/transactions", 200),
        ("GET", "/v1/transactions", 401),
        ("POST", "/oauth/token", 401),
    ]
    assert new_secret != old_secret
    with client(rotation.env(env), "PAYRAIL_ROTATE") as new:
        assert new.transactions.page(limit=1).data
        assert new.merchants.page(limit=1).data


@pytest.mark.anyio
async def test_the_async_client_after_a_rotation(env: Dict[str, str], rotation: Rotation) -> None:
    recorder = Recorder()
    async with recorder.async_http() as http, async_client(
        rotation.env(env), "PAYRAIL_ROTATE", http_client=http
    ) as old:
        assert (await old.transactions.page(limit=1)).data
        rotation.secret = rotate(env)
        with pytest.raises(payrail.AuthenticationError) as refused:
            await old.merchants.page(limit=1)
        assert (refused.value.status, refused.value.code) == (401, "invalid_client")
    assert recorder.steps()[-2:] == [("GET", "/v1/merchants", 401), ("POST", "/oauth/token", 401)]
    async with async_client(rotation.env(env), "PAYRAIL_ROTATE") as new:
        assert (await new.merchants.page(limit=1)).data


# --- Webhooks ----------------------------------------------------------------------------------


class Receiver:
    """A small webhook receiver: verifies each delivery with the library over the raw body,
    answers 204 when it verifies and 400 when it does not."""

    def __init__(self, port: int, secret: str) -> None:
        self.webhook = payrail.Webhook(secret)
        self.verified: List[payrail.Event] = []
        self.refused: List[str] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if self.path != "/webhooks" or length > 64 * 1024:
                    self.send_response(404 if self.path != "/webhooks" else 413)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = self.rfile.read(length)
                try:
                    event = receiver.webhook.verify(body, self.headers.get(payrail.SIGNATURE_HEADER))
                except payrail.WebhookVerificationError as refused:
                    with receiver.lock:
                        receiver.refused.append(refused.reason)
                    status = 400
                except payrail.DecodeError:
                    status = 500
                else:
                    with receiver.lock:
                        receiver.verified.append(event)
                    status = 204
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def events_of(self, transaction_id: int) -> List[payrail.Event]:
        with self.lock:
            return [
                e for e in self.verified if e.transaction is not None and e.transaction.id == transaction_id
            ]


@pytest.fixture(scope="session")
def receiver(env: Dict[str, str]) -> Iterator[Receiver]:
    running = Receiver(int(env["PAYRAIL_WEBHOOK_PORT"]), env["PAYRAIL_WEBHOOK_SECRET"])
    yield running
    running.stop()


@pytest.mark.anyio
async def test_a_webhook_from_the_worker_is_verified_by_the_library(
    env: Dict[str, str], receiver: Receiver
) -> None:
    reference = f"py-{uuid.uuid4().hex[:12]}"
    async with async_client(env) as api:
        session = await api.checkout.create(
            public_key=env["PAYRAIL_PUBLISHABLE_KEY"],
            amount=Decimal("12.34"),
            currency=payrail.Currency.EUR,
            title="Python library order",
            external_reference=reference,
            redirect_url="https://shop.example/done",
            idempotency_key=reference,
        )
        assert session.id.startswith("cs_")
        # The same key and options: the same session.
        again = await api.checkout.create(
            public_key=env["PAYRAIL_PUBLISHABLE_KEY"],
            amount="12.34",
            currency="EUR",
            title="Python library order",
            external_reference=reference,
            redirect_url="https://shop.example/done",
            idempotency_key=reference,
        )
        assert again == session
        transaction_id = session.transaction_id
        paid = await api.sandbox.act(transaction_id, payrail.SandboxAction.PAY, amount="12.34")
        assert (paid.status, paid.raw_status) == (payrail.Status.PAID, payrail.RawStatus.SUCCEEDED)
        assert paid.amount.gross == Decimal("12.34") and paid.external_reference == reference
        settled = await api.sandbox.act(transaction_id, "settle")
        assert settled.raw_status == payrail.RawStatus.PAID
        with pytest.raises(payrail.ConflictError):
            await api.sandbox.act(transaction_id, "settle")

        # The worker delivers; the receiver verifies with the library. Poll with a deadline.
        deadline = time.monotonic() + DELIVERY_DEADLINE
        while time.monotonic() < deadline:
            delivered = {type(e) for e in receiver.events_of(transaction_id)}
            if payrail.PaymentPaid in delivered:
                break
            time.sleep(0.2)
        delivered_events = receiver.events_of(transaction_id)
        paid_events = [e for e in delivered_events if isinstance(e, payrail.PaymentPaid)]
        assert paid_events, f"no payment.paid for {transaction_id} within {DELIVERY_DEADLINE} s"
        event = paid_events[0]
        assert event.data.external_reference == reference
        assert event.data.amount.gross == Decimal("12.34")

        # The events feed has the same events, typed, newest first; by type; by id.
        feed = [e async for e in api.events.list(transaction_id=transaction_id)]
        assert [e.type for e in feed] == ["payment.paid", "payment.succeeded"]
        assert isinstance(feed[0], payrail.PaymentPaid) and isinstance(feed[1], payrail.PaymentSucceeded)
        assert event.id in {e.id for e in feed}
        only_paid = await api.events.page(type=payrail.EventType.PAYMENT_PAID, transaction_id=transaction_id)
        assert [e.id for e in only_paid] == [feed[0].id]
        found = await api.events.retrieve(feed[1].id)
        assert found == feed[1]
        assert await api.events.retrieve("evt_no_such_event") is None

    with client(env) as sync:
        recent = sync.events.page(limit=10)
        assert len(recent) > 0 and all(e.id.startswith("evt_") for e in recent)
        assert sync.events.retrieve(feed[0].id) == feed[0]
        assert sync.events.retrieve("evt_/..") is None
        assert sync.transactions.retrieve(transaction_id) == settled
        by_reference = list(sync.transactions.list(external_reference=reference))
        assert [t.id for t in by_reference] == [transaction_id]


def test_the_receiver_refuses_forgeries(env: Dict[str, str], receiver: Receiver) -> None:
    url = f"http://127.0.0.1:{env['PAYRAIL_WEBHOOK_PORT']}/webhooks"
    secret = env["PAYRAIL_WEBHOOK_SECRET"]
    body = json.dumps(
        {"id": "evt_local_check", "type": "payout.created", "created": int(time.time()), "data": {}}
    ).encode()
    now = int(time.time())
    good = payrail.signature_header(secret, now, body)
    cases = [
        (body, good, 204),
        (body + b" ", good, 400),
        (body.replace(b"payout", b"refund"), good, 400),
        (body, payrail.signature_header("whsec_not_the_secret", now, body), 400),
        (body, payrail.signature_header(secret, now - 3600, body), 400),
        (body, None, 400),
        (body, good.upper(), 400),
    ]
    with httpx.Client(timeout=10) as http:
        for payload, header, status in cases:
            headers = {"Content-Type": "application/json"}
            if header is not None:
                headers[payrail.SIGNATURE_HEADER] = header
            answer = http.post(url, content=payload, headers=headers)
            assert answer.status_code == status, (payload[-20:], header)
    with receiver.lock:
        refused = list(receiver.refused)
    assert {"no_matching_signature", "timestamp_out_of_tolerance", "malformed_header"} <= set(refused)
