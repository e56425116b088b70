"""The clients' behaviour against a scripted local server, each test run with the sync and
the async client: the token cache, retries, errors, lists, limits and what is sent."""

from __future__ import annotations

import base64
import logging
import socket
import time
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import anyio
import pytest

import payrail

from .conftest import ID, SECRET, Factory
from .scripted import Reply, Server, error, event, merchant, page, transaction

pytestmark = pytest.mark.anyio

TRANSACTIONS = "/v1/transactions"


def paid_page(*ids: int, **envelope: Any) -> Reply:
    return Reply(json=page([transaction(i) for i in ids], **envelope))


# --- The token ---------------------------------------------------------------------------------


async def test_the_token_is_fetched_once_with_form_encoded_basic_credentials(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, paid_page(3, 2))
    api = make_api(scope=[payrail.Scope.TRANSACTIONS_READ, "merchants:read"])
    for _ in range(3):
        result = await api.page("transactions")
        assert [t.id for t in result] == [3, 2]
    (token_request,) = server.seen("/oauth/token")
    assert token_request.body == b"grant_type=client_credentials&scope=transactions%3Aread+merchants%3Aread"
    assert token_request.header("content-type") == "application/x-www-form-urlencoded"
    scheme, credentials = (token_request.header("authorization") or "").split(" ")
    assert scheme == "Basic"
    # RFC 6749 2.3.1: each part form-encoded, then joined and base64-encoded.
    assert base64.b64decode(credentials).decode() == "cli_test:sk_live_s3cr3t%2B%2F%3D%3A%C3%A9"
    assert [s.header("authorization") for s in server.seen(TRANSACTIONS)] == ["Bearer tok-1"] * 3
    assert await api.token() == "tok-1"


async def test_concurrent_callers_share_one_token_fetch(make_api: Factory, server: Server) -> None:
    # The token endpoint is slow, so that every caller asks while the first fetch is under way.
    server.issue_tokens(delay=0.3)
    server.on("GET", TRANSACTIONS, paid_page(1))
    api = make_api()
    async with anyio.create_task_group() as group:
        for _ in range(8):
            group.start_soon(api.page, "transactions")
    assert len(server.seen("/oauth/token")) == 1
    calls = server.seen(TRANSACTIONS)
    assert len(calls) == 8
    assert {c.header("authorization") for c in calls} == {"Bearer tok-1"}


async def test_a_401_gets_one_new_token_and_one_more_try(make_api: Factory, server: Server) -> None:
    server.issue_tokens()
    server.on(
        "GET",
        TRANSACTIONS,
        Reply(401, error("invalid_client", "the access token is not valid")),
        paid_page(5),
    )
    api = make_api()
    result = await api.page("transactions")
    assert [t.id for t in result] == [5]
    assert len(server.seen("/oauth/token")) == 2
    assert [s.header("authorization") for s in server.seen(TRANSACTIONS)] == [
        "Bearer tok-1",
        "Bearer tok-2",
    ]
    # The new token is the one kept.
    await api.page("transactions")
    assert len(server.seen("/oauth/token")) == 2


async def test_a_second_401_is_an_authentication_error(make_api: Factory, server: Server) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, Reply(401, error("invalid_client", "revoked")))
    api = make_api()
    with pytest.raises(payrail.AuthenticationError) as raised:
        await api.page("transactions")
    assert (raised.value.status, raised.value.code) == (401, "invalid_client")
    assert len(server.seen(TRANSACTIONS)) == 2
    assert len(server.seen("/oauth/token")) == 2


async def test_bad_credentials_are_an_authentication_error_and_not_retried(
    make_api: Factory, server: Server
) -> None:
    server.on(
        "POST",
        "/oauth/token",
        Reply(
            401,
            error("invalid_client", "client authentication failed"),
            headers={"Payrail-Request-Id": "req_abc123"},
        ),
    )
    api = make_api()
    with pytest.raises(payrail.AuthenticationError) as raised:
        await api.page("transactions")
    err = raised.value
    assert (err.status, err.code, err.request_id) == (401, "invalid_client", "req_abc123")
    assert err.description == "client authentication failed"
    assert len(server.seen("/oauth/token")) == 1
    assert server.seen(TRANSACTIONS) == []


def test_the_token_is_refreshed_a_minute_before_it_expires_or_at_half_its_life() -> None:
    core = payrail.Client("https://api.payrail.example", ID, SECRET)._core
    issued = payrail.models.TokenResponse("tok", "Bearer", 3600, "transactions:read")
    core.store_token(issued, now=1000.0)
    assert core.cached_token(now=1000.0 + 3539) == "tok"
    assert core.cached_token(now=1000.0 + 3540) is None
    short = payrail.models.TokenResponse("short", "Bearer", 10, "transactions:read")
    core.store_token(short, now=0.0)
    assert core.cached_token(now=4.9) == "short"
    assert core.cached_token(now=5.0) is None
    # Forgetting only drops the token it names: another caller may have refreshed it already.
    core.store_token(issued, now=0.0)
    core.forget_token("short")
    assert core.cached_token(now=1.0) == "tok"
    core.forget_token("tok")
    assert core.cached_token(now=1.0) is None


# --- Retries -----------------------------------------------------------------------------------


async def test_a_429_waits_for_retry_after(make_api: Factory, server: Server) -> None:
    server.issue_tokens()
    server.on(
        "GET",
        TRANSACTIONS,
        Reply(429, error("rate_limited", "slow down"), headers={"Retry-After": "1"}),
        paid_page(1),
    )
    api = make_api()
    result = await api.page("transactions")
    assert [t.id for t in result] == [1]
    first, second = server.seen(TRANSACTIONS)
    assert second.at - first.at >= 1.0


async def test_a_retry_after_longer_than_the_cap_is_raised_with_it(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on(
        "GET",
        TRANSACTIONS,
        Reply(429, error("rate_limited", "slow down"), headers={"Retry-After": "120"}),
    )
    api = make_api()
    with pytest.raises(payrail.RateLimitError) as raised:
        await api.page("transactions")
    assert raised.value.retry_after == 120.0
    assert "retry after 120 s" in str(raised.value)
    assert len(server.seen(TRANSACTIONS)) == 1


async def test_5xx_are_retried_then_raised(make_api: Factory, server: Server) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, Reply(503, error("server_error", "try later")))
    api = make_api(max_retries=2)
    with pytest.raises(payrail.ServerError) as raised:
        await api.page("transactions")
    assert (raised.value.status, raised.value.code) == (503, "server_error")
    assert len(server.seen(TRANSACTIONS)) == 3


async def test_a_5xx_then_a_success_is_a_success(make_api: Factory, server: Server) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, Reply(500, error("server_error", "x")), paid_page(9))
    api = make_api()
    assert [t.id for t in await api.page("transactions")] == [9]


async def test_backoff_grows_between_retries(make_api: Factory, server: Server) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, Reply(502, error("server_error", "x")))
    api = make_api(max_retries=2, initial_backoff=0.2, max_backoff=8.0)
    with pytest.raises(payrail.ServerError):
        await api.page("transactions")
    a, b, c = (s.at for s in server.seen(TRANSACTIONS))
    # Equal jitter: at least half of 0.2 s, then at least half of 0.4 s.
    assert b - a >= 0.1
    assert c - b >= 0.2


async def test_a_sandbox_action_is_never_repeated_on_a_5xx(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on("POST", "/sandbox/transactions/7/settle", Reply(500, error("server_error", "x")))
    api = make_api()
    with pytest.raises(payrail.ServerError):
        await api.call(api.client.sandbox.act, 7, "settle")
    assert len(server.seen("/sandbox/transactions/7/settle")) == 1


async def test_other_4xx_are_raised_at_once_with_the_api_error(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on(
        "GET",
        TRANSACTIONS,
        Reply(
            400,
            error("invalid_request", "created_after: not a date-time"),
            headers={"Payrail-Request-Id": "req_3f9a"},
        ),
    )
    api = make_api()
    with pytest.raises(payrail.InvalidRequestError) as raised:
        await api.page("transactions", created_after="yesterday")
    err = raised.value
    assert (err.status, err.code, err.request_id) == (400, "invalid_request", "req_3f9a")
    assert err.description == "created_after: not a date-time"
    assert str(err) == "invalid_request (400): created_after: not a date-time [request req_3f9a]"
    assert len(server.seen(TRANSACTIONS)) == 1


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (403, payrail.PermissionDeniedError),
        (404, payrail.NotFoundError),
        (409, payrail.ConflictError),
        (405, payrail.APIError),
    ],
)
async def test_each_status_has_its_error(
    make_api: Factory, server: Server, status: int, kind: type
) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, Reply(status, error("some_new_code", "described")))
    api = make_api()
    with pytest.raises(payrail.APIError) as raised:
        await api.page("transactions")
    assert type(raised.value) is kind
    assert raised.value.request_id is None
    # A code newer than the library is kept as it came.
    assert raised.value.code == "some_new_code"


async def test_an_answer_without_an_error_body_is_still_typed_by_status(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, Reply(502, body=b"<html><h1>Bad gateway</h1></html>"))
    api = make_api(max_retries=0)
    with pytest.raises(payrail.ServerError) as raised:
        await api.page("transactions")
    assert raised.value.code is None
    assert "Bad gateway" in raised.value.description


async def test_a_refused_connection_is_retried_then_raised(make_api: Factory) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port any more.
    api = make_api(base_url=f"http://127.0.0.1:{port}", max_retries=1)
    with pytest.raises(payrail.APIConnectionError) as raised:
        await api.token()
    assert not isinstance(raised.value, payrail.APITimeoutError)
    assert "POST /oauth/token" in str(raised.value)


async def test_a_request_that_takes_too_long_times_out_and_a_read_is_retried(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, Reply(json=page([]), delay=5.0))
    api = make_api(timeout=0.3, max_retries=1)
    started = time.monotonic()
    with pytest.raises(payrail.APITimeoutError):
        await api.page("transactions")
    assert time.monotonic() - started < 4.0
    assert len(server.seen(TRANSACTIONS)) == 2


async def test_an_answer_that_trickles_past_the_deadline_times_out(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    # Each chunk arrives well within the read timeout, the whole body (2 s) far past it.
    body = page([transaction(i) for i in range(1, 21)])
    server.on("GET", TRANSACTIONS, Reply(json=body, chunk=200, chunk_delay=0.1))
    api = make_api(timeout=0.5, max_retries=0)
    started = time.monotonic()
    with pytest.raises(payrail.APITimeoutError, match="took over 0.5 s"):
        await api.page("transactions")
    assert time.monotonic() - started < 1.5


# --- Limits ------------------------------------------------------------------------------------


async def test_an_answer_declared_larger_than_the_cap_is_refused_unread(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, Reply(claimed_length=payrail.MAX_ANSWER_BYTES + 1))
    api = make_api()
    with pytest.raises(payrail.DecodeError) as raised:
        await api.page("transactions")
    assert "larger than 8388608 bytes" in str(raised.value)
    assert len(server.seen(TRANSACTIONS)) == 1


async def test_a_streamed_answer_past_the_cap_is_refused_while_read(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    huge = b'{"object":"list","data":[' + b" " * payrail.MAX_ANSWER_BYTES + b"]}"
    server.on("GET", TRANSACTIONS, Reply(body=huge, chunk=1 << 20))
    api = make_api()
    with pytest.raises(payrail.DecodeError) as raised:
        await api.page("transactions")
    assert "larger than" in str(raised.value)


async def test_an_answer_that_is_not_json_is_a_decode_error(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, Reply(body=b"[" * 100_000))
    api = make_api()
    with pytest.raises(payrail.DecodeError) as raised:
        await api.page("transactions")
    assert raised.value.status == 200


# --- Lists -------------------------------------------------------------------------------------


async def test_a_list_follows_every_page_with_its_filters(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on(
        "GET",
        TRANSACTIONS,
        paid_page(9, 8, 7, has_more=True, next_cursor=7),
        paid_page(6, 5, has_more=True, next_cursor=5),
        paid_page(4),
    )
    api = make_api()
    items = await api.collect("transactions", status=payrail.Status.PAID, limit=3)
    assert [t.id for t in items] == [9, 8, 7, 6, 5, 4]
    assert [s.query for s in server.seen(TRANSACTIONS)] == [
        [("limit", "3"), ("status", "paid")],
        [("limit", "3"), ("status", "paid"), ("starting_after", "7")],
        [("limit", "3"), ("status", "paid"), ("starting_after", "5")],
    ]


@pytest.mark.parametrize(
    ("second", "problem"),
    [
        (page([transaction(6)], has_more=True, next_cursor=7), "a next_cursor seen before"),
        (page([transaction(6)], has_more=True, next_cursor=None), "has_more without a next_cursor"),
        (page([], has_more=True, next_cursor=3), "has_more on an empty page"),
    ],
)
async def test_a_page_that_cannot_be_followed_ends_the_list_with_an_error(
    make_api: Factory, server: Server, second: Any, problem: str
) -> None:
    server.issue_tokens()
    server.on(
        "GET",
        TRANSACTIONS,
        paid_page(9, 8, 7, has_more=True, next_cursor=7),
        Reply(json=second),
        paid_page(1),
    )
    api = make_api()
    items, failure = await api.collect_until_error("transactions")
    assert [t.id for t in items] == [9, 8, 7]
    assert isinstance(failure, payrail.DecodeError)
    assert problem in str(failure)
    assert len(server.seen(TRANSACTIONS)) == 2


async def test_a_cursor_equal_to_the_starting_one_does_not_move(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, paid_page(4, has_more=True, next_cursor=5))
    api = make_api()
    items, failure = await api.collect_until_error("transactions", starting_after=5)
    assert items == [] and isinstance(failure, payrail.DecodeError)


async def test_every_filter_is_sent_as_the_api_reads_it(make_api: Factory, server: Server) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, paid_page())
    server.on("GET", "/v1/merchants", Reply(json=page([])))
    server.on("GET", "/v1/events", Reply(json=page([])))
    api = make_api()
    paris = timezone(timedelta(hours=1))
    await api.page(
        "transactions",
        status="refunded",
        merchant_id=12,
        external_reference="order 7/é&+",
        id=99,
        created_after=datetime(2026, 11, 21, 1, 0, 0, 250000, tzinfo=paris),
        created_before=date(2026, 11, 22),
        limit=100,
        starting_after=500,
    )
    await api.page("transactions", created_after=0, created_before="2026-11-21T00:00:00+01:00")
    await api.page("merchants", psp_reference_id="ref-1", id=3, limit=1, starting_after=10)
    await api.page(
        "events",
        type=payrail.EventType.PAYMENT_PAID,
        transaction_id=5,
        created_after=datetime(2026, 1, 1, tzinfo=timezone.utc),
        limit=5,
        starting_after="evt_x",
    )
    first, second = server.seen(TRANSACTIONS)
    assert first.query == [
        ("limit", "100"),
        ("starting_after", "500"),
        ("status", "refunded"),
        ("merchant_id", "12"),
        ("external_reference", "order 7/é&+"),
        ("id", "99"),
        ("created_after", "2026-11-21T00:00:00.250000Z"),
        ("created_before", "2026-11-22"),
    ]
    assert second.params == {
        "created_after": "1970-01-01T00:00:00Z",
        "created_before": "2026-11-21T00:00:00+01:00",
    }
    assert server.seen("/v1/merchants")[0].params == {
        "limit": "1",
        "starting_after": "10",
        "id": "3",
        "psp_reference_id": "ref-1",
    }
    assert server.seen("/v1/events")[0].params == {
        "limit": "5",
        "starting_after": "evt_x",
        "type": "payment.paid",
        "transaction_id": "5",
        "created_after": "2026-01-01T00:00:00Z",
    }


async def test_arguments_of_the_wrong_type_are_refused_before_any_request(
    make_api: Factory, server: Server
) -> None:
    api = make_api()
    with pytest.raises(ValueError, match="naive datetime"):
        await api.page("transactions", created_after=datetime(2026, 1, 1))
    with pytest.raises(TypeError):
        await api.page("transactions", merchant_id="12")
    with pytest.raises(TypeError):
        await api.page("transactions", id=True)
    assert server.seen() == []


async def test_retrieve_answers_none_for_what_is_not_there(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, paid_page())
    server.on("GET", "/v1/merchants/4", Reply(404, error("not_found", "no such merchant")))
    server.on("GET", "/v1/merchants/5", Reply(json=merchant(5)))
    api = make_api()
    assert await api.retrieve("transactions", 42) is None
    assert server.seen(TRANSACTIONS)[0].params == {"id": "42"}
    assert await api.retrieve("merchants", 4) is None
    found = await api.retrieve("merchants", 5)
    assert found.id == 5 and found.status is payrail.MerchantStatus.ACTIVE
    assert found.created_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


async def test_the_events_feed_is_typed_and_retrieve_looks_one_up_by_id(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    first_page = Reply(
        json=page(
            [
                event("evt_3", "payment.refunded", transaction(7, status="refunded")),
                event("evt_2", "payout.created", {"payout": 1}),
            ],
            has_more=True,
            next_cursor="evt_2",
        )
    )
    server.on("GET", "/v1/events/evt_1", Reply(json=event("evt_1", "payment.paid", transaction(7))))
    server.on("GET", "/v1/events/evt_0", Reply(404, error("not_found", "no such event")))
    api = make_api()
    found = await api.retrieve("events", "evt_1")
    assert isinstance(found, payrail.PaymentPaid)
    assert found.data.id == 7 and found.type == payrail.EventType.PAYMENT_PAID
    assert await api.retrieve("events", "evt_0") is None
    assert [s.params for s in server.seen("/v1/events/evt_1")] == [{}]
    assert server.seen("/v1/events") == []
    server.on("GET", "/v1/events", first_page)
    first = (await api.page("events")).data
    assert isinstance(first[0], payrail.PaymentRefunded)
    assert isinstance(first[1], payrail.UnknownEvent)
    assert first[1].type == "payout.created" and first[1].data == {"payout": 1}
    assert first[1].transaction is None


# --- The bookmark ------------------------------------------------------------------------------


async def test_the_last_bookmark_is_sent_with_the_next_read(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on(
        "GET",
        TRANSACTIONS,
        Reply(json=page([]), headers={"Payrail-Bookmark": "0000001a-0000-4000"}),
        Reply(json=page([]), headers={"Payrail-Bookmark": "not a bookmark!"}),
        Reply(json=page([])),
    )
    server.on("GET", "/v1/merchants", Reply(json=page([]), headers={"Payrail-Bookmark": "bm-2"}))
    api = make_api()
    assert api.client.bookmark is None
    await api.page("transactions")
    await api.page("transactions")
    await api.page("transactions")
    await api.page("merchants")
    await api.page("transactions")
    sent = [s.header("payrail-bookmark") for s in server.seen() if s.method == "GET"]
    # None at first; then the first one, kept over a value not shaped like a bookmark and over
    # an answer without one; then the merchants' one.
    assert sent == [None, "0000001a-0000-4000", "0000001a-0000-4000", "0000001a-0000-4000", "bm-2"]
    assert api.client.bookmark == "bm-2"


# --- Secrets -----------------------------------------------------------------------------------


async def test_no_secret_shows_in_reprs_errors_or_logs(
    make_api: Factory, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.on_call(
        "POST",
        "/oauth/token",
        lambda _: Reply(
            json={
                "access_token": "prt_very_secret_token",
                "token_type": "Bearer",
                "expires_in": 3600,
                "scope": "transactions:read",
            }
        ),
    )
    server.on("GET", TRANSACTIONS, Reply(401, error("invalid_client", "revoked")))
    api = make_api()
    with pytest.raises(payrail.AuthenticationError) as raised:
        await api.page("transactions")
    texts = [
        repr(api.client),
        str(api.client),
        repr(api.client._core),
        str(raised.value),
        repr(raised.value),
        caplog.text,
        repr(api.client._core.token_request()),
        repr(payrail.models.TokenResponse("prt_very_secret_token", "Bearer", 1, "")),
    ]
    assert "cli_test" in repr(api.client)
    for text in texts:
        assert SECRET not in text
        assert "s3cr3t" not in text
        assert "prt_very_secret_token" not in text
    # Only the secret's wrapper is stored; nothing else holds it as plain text.
    assert "s3cr3t" not in repr(vars(api.client._core))


# --- Sandbox helpers ---------------------------------------------------------------------------


async def test_checkout_and_sandbox_send_what_the_api_reads(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on(
        "POST",
        "/checkout/sessions",
        Reply(201, {"id": "cs_1", "transaction_id": 77, "url": "http://x/checkout/cs_1"}),
    )
    server.on("POST", "/sandbox/transactions/77/pay", Reply(json=transaction(77, raw_status="succeeded")))
    server.on("POST", "/sandbox/transactions/77/settle", Reply(json=transaction(77)))
    api = make_api()
    session = await api.call(
        api.client.checkout.create,
        public_key="pk_live_0000000000000001",
        amount=Decimal("12.50"),
        currency=payrail.Currency.EUR,
        title="An order",
        external_reference="order-77",
        redirect_url="https://shop.example/done",
        idempotency_key="order-77",
    )
    assert session == payrail.CheckoutSession("cs_1", 77, "http://x/checkout/cs_1")
    (created,) = server.seen("/checkout/sessions")
    assert created.header("authorization") is None
    assert created.header("content-type") == "application/json"
    assert created.body == (
        b'{"publicKey":"pk_live_0000000000000001","amount":"12.50","currency":"EUR",'
        b'"title":"An order","externalReference":"order-77","idempotencyKey":"order-77",'
        b'"redirectUrl":"https://shop.example/done","allowCrypto":true}'
    )
    paid = await api.call(api.client.sandbox.act, 77, payrail.SandboxAction.PAY, amount="12.50")
    assert paid.raw_status is payrail.RawStatus.SUCCEEDED
    await api.call(api.client.sandbox.act, 77, "settle", network="base")
    assert server.seen("/sandbox/transactions/77/pay")[0].body == b'{"amount":"12.50"}'
    assert server.seen("/sandbox/transactions/77/settle")[0].body == b'{"network":"base"}'
    assert server.seen("/sandbox/transactions/77/pay")[0].header("authorization") == "Bearer tok-1"
    with pytest.raises(TypeError, match="float"):
        await api.call(api.client.sandbox.act, 77, "pay", amount=12.5)
    with pytest.raises(TypeError, match="needs an amount"):
        await api.call(api.client.sandbox.act, 77, "refund")
    with pytest.raises(TypeError, match="takes no amount"):
        await api.call(api.client.sandbox.act, 77, "fail", amount="1")
    with pytest.raises(ValueError, match="unknown sandbox action"):
        await api.call(api.client.sandbox.act, 77, "explode")


async def test_a_checkout_without_idempotency_key_is_not_repeated(
    make_api: Factory, server: Server
) -> None:
    server.on("POST", "/checkout/sessions", Reply(503, error("payments_unavailable", "none")))
    api = make_api()
    options: dict[str, Any] = dict(
        public_key="pk_live_0000000000000001",
        amount=10,
        currency="EUR",
        title="t",
        external_reference="r",
        redirect_url="https://shop.example/done",
    )
    with pytest.raises(payrail.ServerError):
        await api.call(api.client.checkout.create, **options)
    assert len(server.seen("/checkout/sessions")) == 1
    with pytest.raises(payrail.ServerError):
        await api.call(api.client.checkout.create, idempotency_key="k-1", **options)
    assert len(server.seen("/checkout/sessions")) == 1 + 4


# --- Decoding ----------------------------------------------------------------------------------


async def test_values_newer_than_the_library_are_kept_and_broken_ones_refused(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    newer = transaction(1, status="disputed", raw_status="chargeback", amount_status=None)
    newer["a_member_from_the_future"] = {"x": 1}
    server.on(
        "GET",
        TRANSACTIONS,
        Reply(json=page([newer])),
        Reply(json=page([{k: v for k, v in transaction(2).items() if k != "merchant_id"}])),
        Reply(json=page([transaction(3, amount={**transaction(3)["amount"], "gross": 12.5})])),
        Reply(json=page([transaction(4, object="merchant")])),
    )
    api = make_api()
    (kept,) = (await api.page("transactions")).data
    assert kept.status == "disputed" and not isinstance(kept.status, payrail.Status)
    assert kept.raw_status == "chargeback"
    assert kept.amount_status is None
    assert kept.amount.gross == Decimal("40.00") and kept.amount.bridge_fee is None
    assert kept.paid_at == datetime(2026, 11, 21, 4, 36, tzinfo=timezone.utc)
    for problem in ("merchant_id is missing", "gross: expected a decimal string", "object"):
        with pytest.raises(payrail.DecodeError, match=problem):
            await api.page("transactions")


# --- The client itself -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["https://api.payrail.example", "https://api.payrail.example/base/", "http://127.0.0.1:8787",
     "http://[::1]:8787", "http://localhost:8787", "http://127.0.0.2"],
)
def test_https_or_local_http_base_urls_are_taken(url: str) -> None:
    client = payrail.Client(url, ID, SECRET)
    assert client.base_url.endswith("/")
    assert str(client._core.url("v1/transactions")).startswith(client.base_url)
    client.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://api.payrail.example", "plain http"),
        ("ftp://api.payrail.example", "https"),
        ("https://user:hunter2@api.payrail.example", "user name or password"),
        ("https://api.payrail.example?x=1", "query"),
        ("", "URL"),
    ],
)
def test_other_base_urls_are_a_config_error(url: str, message: str) -> None:
    with pytest.raises(payrail.ConfigError, match=message) as raised:
        payrail.Client(url, ID, SECRET)
    assert "hunter2" not in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_bad_settings_are_config_errors() -> None:
    url = "https://api.payrail.example"
    settings: list[dict[str, Any]] = [
        dict(timeout=0),
        dict(max_retries=-1),
        dict(initial_backoff=-1.0),
        dict(scope=""),
        dict(http_client=object()),
    ]
    for bad in settings:
        with pytest.raises(payrail.ConfigError):
            payrail.Client(url, ID, SECRET, **bad)
    with pytest.raises(payrail.ConfigError):
        payrail.Client(url, ID, "")
    with pytest.raises(payrail.ConfigError, match="AsyncClient"):
        payrail.AsyncClient(url, ID, SECRET, http_client=payrail.Client)  # type: ignore[arg-type]


def test_a_given_http_client_is_used_and_left_open(server: Server) -> None:
    server.issue_tokens()
    server.on("GET", TRANSACTIONS, paid_page(1))
    seen: list[str] = []
    import httpx

    with httpx.Client(event_hooks={"request": [lambda r: seen.append(r.url.path)]}) as http:
        with payrail.Client(server.url, ID, SECRET, http_client=http) as client:
            assert [t.id for t in client.transactions.list()] == [1]
        assert not http.is_closed
        assert seen == ["/oauth/token", TRANSACTIONS]


def test_backoff_doubles_within_its_jitter_and_stops_after_the_last_retry() -> None:
    policy = payrail._config.RetryPolicy()
    for attempt, full in ((0, 0.25), (1, 0.5), (2, 1.0)):
        for _ in range(50):
            delay = policy.delay(attempt, None)
            assert delay is not None and full / 2 <= delay <= full
    assert policy.delay(3, None) is None
    long = payrail._config.RetryPolicy(max_retries=40)
    assert (long.delay(39, None) or 0) <= 8.0
    assert policy.delay(0, 2.0) == 2.0
    assert policy.delay(0, 61.0) is None
    assert payrail._config.RetryPolicy(max_retries=0).delay(0, 0.0) is None


def test_retry_after_is_read_as_seconds_or_as_a_date() -> None:
    import httpx

    read = payrail._core.retry_after
    assert read(httpx.Headers({"Retry-After": "7"})) == 7.0
    assert read(httpx.Headers({"Retry-After": "soon"})) is None
    # Digits to str.isdigit but not to int(), and a number too long to be one: not a wait.
    assert read(httpx.Headers([(b"Retry-After", b"\xb2")])) is None  # "\u00b2" in Latin-1
    assert read(httpx.Headers({"Retry-After": "9" * 5000})) is None
    assert read(httpx.Headers({})) is None
    when = read(httpx.Headers({"Retry-After": "Wed, 21 Oct 2015 07:28:30 GMT"}), now=1445412500.0)
    assert when == 10.0


def test_the_version_is_the_packages() -> None:
    import pathlib
    import re

    pyproject = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"
    declared = re.search(r'^version = "([^"]+)"', pyproject.read_text(), re.M)
    assert declared is not None and declared.group(1) == payrail.__version__


async def test_pages_going_round_in_a_loop_end_the_list_with_an_error(
    make_api: Factory, server: Server
) -> None:
    server.issue_tokens()
    server.on(
        "GET",
        TRANSACTIONS,
        paid_page(9, 8, 7, has_more=True, next_cursor=7),
        paid_page(6, 5, has_more=True, next_cursor=5),
        paid_page(9, 8, 7, has_more=True, next_cursor=7),
        paid_page(1),
    )
    api = make_api()
    items, failure = await api.collect_until_error("transactions")
    assert [t.id for t in items] == [9, 8, 7, 6, 5]
    assert isinstance(failure, payrail.DecodeError)
    assert "a next_cursor seen before" in str(failure)
    assert len(server.seen(TRANSACTIONS)) == 3


async def test_a_token_that_is_no_bearer_token_is_refused_without_repeating_it(
    make_api: Factory, server: Server
) -> None:
    server.on(
        "POST",
        "/oauth/token",
        Reply(json={"access_token": "tok\nLEAKED", "token_type": "Bearer", "expires_in": 3600}),
    )
    api = make_api()
    with pytest.raises(payrail.DecodeError) as raised:
        await api.page("transactions")
    assert "LEAKED" not in str(raised.value)
    assert server.seen(TRANSACTIONS) == []


async def test_retrieve_without_a_transaction_id_is_refused_before_any_request(
    make_api: Factory, server: Server
) -> None:
    api = make_api()
    for id in (None, "7", 1.5, True):
        with pytest.raises(TypeError):
            await api.retrieve("transactions", id)
    assert server.seen() == []
