"""The asynchronous client: carries out the plans of ``payrail._core`` with
``httpx.AsyncClient`` on asyncio. Every rule is in ``_core``; this file mirrors ``_sync.py``
with ``await``."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, AsyncIterator, Iterable, Optional, Type, TypeVar, Union

import httpx

from . import _config, _core, _params
from ._core import Answer, Failure, ListSpec, Plan, Request
from ._params import AmountInput, Params, TimeBound
from .errors import ConfigError
from .models import (
    CheckoutSession,
    Currency,
    Event,
    EventType,
    Merchant,
    Page,
    SandboxAction,
    Scope,
    Status,
    Transaction,
)

T = TypeVar("T")
C = TypeVar("C", int, str)


class AsyncClient:
    """The asynchronous twin of :class:`payrail.Client`, for asyncio: the same arguments,
    resources and behaviour, with ``await`` (and ``async for`` over lists). Share one between
    the tasks of an event loop: one token fetch at a time serves them all.

    ``base_url`` is the API (``https://api.payrail.example``; plain ``http`` only to
    127.0.0.1, ::1 or localhost), ``client_id`` and ``client_secret`` an API client's
    credentials from the portal (Developers, API clients). ``scope`` narrows the token to some
    of the client's scopes (a space-separated string or a list of :class:`Scope`); by default
    it carries every granted one.

    The token is fetched on the first call, cached, shared by every task (one fetch at a
    time), refreshed a minute before it expires, and fetched again once when a call answers
    401. 429 waits for ``Retry-After`` (up to ``max_retry_after`` seconds; a longer wait raises
    :class:`~payrail.RateLimitError` with it); 5xx, network failures and timeouts of reads
    are retried ``max_retries`` times, backing off from ``initial_backoff`` seconds, doubling
    up to ``max_backoff``, with jitter. Other 4xx are raised at once.

    ``timeout`` bounds each request (connecting, every read and write, and the whole answer),
    ``connect_timeout`` the connection. ``http_client`` lets you bring your own
    ``httpx.AsyncClient`` (proxies, event hooks, transports); the client then leaves it open for
    you to close.

    Use it as an async context manager, or await :meth:`aclose`::

        async with payrail.AsyncClient(url, client_id, client_secret) as client:
            async for transaction in client.transactions.list(status="paid"):
                ...
    """

    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        *,
        scope: Union[str, Iterable[Union[Scope, str]], None] = None,
        timeout: float = 30.0,
        connect_timeout: float = 10.0,
        max_retries: int = 3,
        initial_backoff: float = 0.25,
        max_backoff: float = 8.0,
        max_retry_after: float = 60.0,
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        self._core = _core.Core(
            base_url,
            client_id,
            client_secret,
            scope=scope,
            timeout=timeout,
            connect_timeout=connect_timeout,
            retry=_config.RetryPolicy(max_retries, initial_backoff, max_backoff, max_retry_after),
        )
        if http_client is not None and not isinstance(http_client, httpx.AsyncClient):
            raise ConfigError("http_client must be an httpx.AsyncClient (Client takes sync ones)")
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=self._core.timeout)
        # Made on first use, inside the event loop that uses it.
        self._token_lock: Optional[asyncio.Lock] = None
        #: Transactions: ``list``, ``page``, ``retrieve``.
        self.transactions = Transactions(self)
        #: Merchants: ``list``, ``page``, ``retrieve``.
        self.merchants = Merchants(self)
        #: The events feed: ``list``, ``page``, ``retrieve``.
        self.events = Events(self)
        #: Checkout sessions (sandbox helper): ``create``.
        self.checkout = Checkout(self)
        #: Sandbox lifecycle actions: ``act``.
        self.sandbox = Sandbox(self)

    def __repr__(self) -> str:
        # The secret and the token stay out of logs.
        return f"<payrail.AsyncClient base_url={str(self._core.base)!r} client_id={self._core.client_id!r}>"

    @property
    def base_url(self) -> str:
        """The API's base URL."""
        return str(self._core.base)

    @property
    def bookmark(self) -> Optional[str]:
        """The last ``Payrail-Bookmark`` the API answered; sent with the next read, so that it
        sees at least what the last one saw."""
        return self._core.bookmark

    async def access_token(self) -> str:
        """A valid access token: the cached one, or a new one when it is missing or about to
        expire. One task fetches while the others wait for it."""
        token = self._core.cached_token()
        if token is not None:
            return token
        if self._token_lock is None:
            self._token_lock = asyncio.Lock()
        async with self._token_lock:
            token = self._core.cached_token()
            if token is None:
                token = self._core.store_token(await self._run(self._core.token_plan()))
            return token

    async def aclose(self) -> None:
        """Closes the connections (of the ``httpx.AsyncClient`` the client made; one you gave
        it stays open)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await self.aclose()

    # Carrying out plans.

    async def _run(self, plan: Plan[T]) -> T:
        outcome: Any = None
        try:
            while True:
                try:
                    step = plan.send(outcome)
                except StopIteration as done:
                    result: T = done.value
                    return result
                if isinstance(step, _core.Send):
                    outcome = await self._perform(step.request)
                elif isinstance(step, _core.Sleep):
                    await asyncio.sleep(step.seconds)
                    outcome = None
                else:
                    outcome = await self.access_token()
        finally:
            plan.close()

    async def _perform(self, request: Request) -> Union[Answer, Failure]:
        # The whole exchange, the answer's headers and body included, within the total timeout.
        try:
            return await asyncio.wait_for(self._exchange(request), self._core.total_timeout)
        except asyncio.TimeoutError:
            return _core.too_slow(request, self._core.total_timeout)

    async def _exchange(self, request: Request) -> Union[Answer, Failure]:
        try:
            async with self._http.stream(
                request.method,
                request.url,
                headers=list(request.headers),
                content=request.content,
                timeout=self._core.timeout,
                follow_redirects=False,
            ) as response:
                length = _core.declared_length(response.headers)
                if length is not None and length > _core.MAX_ANSWER_BYTES:
                    raise _core.too_large(response.status_code, response.headers)
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    if len(body) + len(chunk) > _core.MAX_ANSWER_BYTES:
                        raise _core.too_large(response.status_code, response.headers)
                    body += chunk
                return Answer(response.status_code, response.headers, bytes(body))
        except httpx.TransportError as exc:
            return _core.failure(request, exc)

    async def _page(self, spec: ListSpec[T, C], params: Params) -> Page[T, C]:
        return await self._run(self._core.page(spec, params))

    async def _iterate(self, spec: ListSpec[T, C], params: Params) -> AsyncIterator[T]:
        pager: _core.Pager[T, C] = _core.Pager(params)
        while not pager.done:
            page = await self._run(self._core.page(spec, pager.params))
            for item in pager.accept(page):
                yield item


class Transactions:
    """``client.transactions``: the institution's transactions, newest first."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    def list(
        self,
        *,
        status: Union[Status, str, None] = None,
        merchant_id: Optional[int] = None,
        external_reference: Optional[str] = None,
        id: Optional[int] = None,
        created_after: Optional[TimeBound] = None,
        created_before: Optional[TimeBound] = None,
        limit: Optional[int] = None,
        starting_after: Optional[int] = None,
    ) -> AsyncIterator[Transaction]:
        """Every transaction the filters select (all of them combined), newest first,
        following ``next_cursor`` page by page; a page is fetched when the one before is
        consumed, ``limit`` (1 to 100, default 25) at a time.

        ``created_after`` is inclusive and ``created_before`` exclusive: an aware
        ``datetime``, a ``date`` (midnight UTC), Unix seconds or text such as
        ``"2026-11-21T00:00:00Z"``. A page that cannot be followed ends the iteration with
        :class:`~payrail.DecodeError` rather than repeat pages.
        """
        params = _params.query(
            _params.TRANSACTION_FILTERS,
            status=status,
            merchant_id=merchant_id,
            external_reference=external_reference,
            id=id,
            created_after=created_after,
            created_before=created_before,
            limit=limit,
            starting_after=starting_after,
        )
        return self._client._iterate(_core.TRANSACTIONS, params)

    async def page(
        self,
        *,
        status: Union[Status, str, None] = None,
        merchant_id: Optional[int] = None,
        external_reference: Optional[str] = None,
        id: Optional[int] = None,
        created_after: Optional[TimeBound] = None,
        created_before: Optional[TimeBound] = None,
        limit: Optional[int] = None,
        starting_after: Optional[int] = None,
    ) -> Page[Transaction, int]:
        """One page (the filters as for :meth:`list`); pass its ``next_cursor`` as
        ``starting_after`` for the next."""
        params = _params.query(
            _params.TRANSACTION_FILTERS,
            status=status,
            merchant_id=merchant_id,
            external_reference=external_reference,
            id=id,
            created_after=created_after,
            created_before=created_before,
            limit=limit,
            starting_after=starting_after,
        )
        return await self._client._page(_core.TRANSACTIONS, params)

    async def retrieve(self, id: int) -> Optional[Transaction]:
        """One transaction, or ``None`` when the institution has none with this id. Read from
        the primary database: what a webhook just said is seen."""
        return await self._client._run(self._client._core.retrieve_transaction(id))


class Merchants:
    """``client.merchants``: the institution's merchants, newest first."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    def list(
        self,
        *,
        psp_reference_id: Optional[str] = None,
        id: Optional[int] = None,
        limit: Optional[int] = None,
        starting_after: Optional[int] = None,
    ) -> AsyncIterator[Merchant]:
        """Every merchant the filters select, newest first, page by page.
        ``psp_reference_id`` is your own reference, set at onboarding."""
        params = _params.query(
            _params.MERCHANT_FILTERS,
            psp_reference_id=psp_reference_id,
            id=id,
            limit=limit,
            starting_after=starting_after,
        )
        return self._client._iterate(_core.MERCHANTS, params)

    async def page(
        self,
        *,
        psp_reference_id: Optional[str] = None,
        id: Optional[int] = None,
        limit: Optional[int] = None,
        starting_after: Optional[int] = None,
    ) -> Page[Merchant, int]:
        """One page of merchants."""
        params = _params.query(
            _params.MERCHANT_FILTERS,
            psp_reference_id=psp_reference_id,
            id=id,
            limit=limit,
            starting_after=starting_after,
        )
        return await self._client._page(_core.MERCHANTS, params)

    async def retrieve(self, id: int) -> Optional[Merchant]:
        """One merchant, or ``None`` when the institution has none with this id."""
        return await self._client._run(self._client._core.retrieve_merchant(id))


class Events:
    """``client.events``: the events feed (scope ``events:read``), newest first: every event
    Payrail made for the institution in the last 30 days, delivered or not."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    def list(
        self,
        *,
        type: Union[EventType, str, None] = None,
        transaction_id: Optional[int] = None,
        created_after: Optional[TimeBound] = None,
        created_before: Optional[TimeBound] = None,
        limit: Optional[int] = None,
        starting_after: Optional[str] = None,
    ) -> AsyncIterator[Event]:
        """Every event the filters select, newest first, page by page, typed as webhooks are
        (:class:`~payrail.PaymentPaid`, ...). To catch up after an outage, remember the newest
        event id you processed and read until you meet it."""
        params = _params.query(
            _params.EVENT_FILTERS,
            type=type,
            transaction_id=transaction_id,
            created_after=created_after,
            created_before=created_before,
            limit=limit,
            starting_after=starting_after,
        )
        return self._client._iterate(_core.EVENTS, params)

    async def page(
        self,
        *,
        type: Union[EventType, str, None] = None,
        transaction_id: Optional[int] = None,
        created_after: Optional[TimeBound] = None,
        created_before: Optional[TimeBound] = None,
        limit: Optional[int] = None,
        starting_after: Optional[str] = None,
    ) -> Page[Event, str]:
        """One page of the feed."""
        params = _params.query(
            _params.EVENT_FILTERS,
            type=type,
            transaction_id=transaction_id,
            created_after=created_after,
            created_before=created_before,
            limit=limit,
            starting_after=starting_after,
        )
        return await self._client._page(_core.EVENTS, params)

    async def retrieve(self, id: str) -> Optional[Event]:
        """The event with this id (``evt_...``, as a delivery's ``Payrail-Event-Id`` carries
        it), exactly as its deliveries send it, or ``None`` when your institution has none."""
        return await self._client._run(self._client._core.retrieve_event(id))


class Checkout:
    """``client.checkout``: checkout sessions, as the browser script creates them."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(
        self,
        *,
        public_key: str,
        amount: AmountInput,
        currency: Union[Currency, str],
        title: str,
        external_reference: str,
        redirect_url: str,
        idempotency_key: Optional[str] = None,
        open_in_new_tab: Optional[bool] = None,
        locale: Optional[str] = None,
    ) -> CheckoutSession:
        """Creates a checkout session for the merchant whose publishable key this is (the
        only credential it takes), with the browser script's options; answers its id, its
        transaction and the hosted page's URL. With an ``idempotency_key`` a repeat returns
        the same session (so it is retried like a read); without, it is never repeated."""
        body = _params.checkout_body(
            public_key=public_key,
            amount=amount,
            currency=currency,
            title=title,
            external_reference=external_reference,
            redirect_url=redirect_url,
            idempotency_key=idempotency_key,
            open_in_new_tab=open_in_new_tab,
            locale=locale,
        )
        return await self._client._run(self._client._core.create_checkout(body))


class Sandbox:
    """``client.sandbox``: drive sandbox payments through their lifecycle (scope
    ``sandbox:write``; sandbox deployments only)."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def act(
        self,
        id: int,
        action: Union[SandboxAction, str],
        *,
        amount: Optional[AmountInput] = None,
        network: Optional[str] = None,
    ) -> Transaction:
        """Applies ``action`` to transaction ``id`` and answers the transaction after it:
        ``pay`` and ``refund`` take an ``amount`` in the order currency, ``settle`` an
        optional ``network`` (another than the payment's means a bridge), ``fail`` nothing.
        An action the payment's status does not allow is :class:`~payrail.ConflictError`.
        Never retried on 5xx: it is not safe to repeat."""
        act, body = _params.sandbox_body(action, amount, network)
        return await self._client._run(self._client._core.sandbox(id, act.value, body))
