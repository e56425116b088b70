"""Fixtures: the scripted server, and each behaviour test run against both clients.

A behaviour test is written once, as a coroutine, against :class:`Api`: with the sync
client each call runs in a worker thread (so concurrent callers are real threads, and the
client's threading lock is what is tested); with the async client each call is awaited on the
event loop (so concurrent callers are tasks, and the asyncio lock is what is tested).
"""

from __future__ import annotations

import functools
from typing import Any, AsyncIterator, Callable, Iterator, List, Optional, Tuple

import anyio
import anyio.to_thread
import pytest

import payrail

from .scripted import Server

ID = "cli_test"
SECRET = "sk_live_s3cr3t+/=:é"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server().start()
    yield running
    running.stop()


class Api:
    """One client, sync or async, behind one async interface."""

    def __init__(self, client: Any, is_async: bool) -> None:
        self.client = client
        self.is_async = is_async

    async def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.is_async:
            return await method(*args, **kwargs)
        return await anyio.to_thread.run_sync(functools.partial(method, *args, **kwargs))

    async def page(self, resource: str, **filters: Any) -> Any:
        return await self.call(getattr(self.client, resource).page, **filters)

    async def retrieve(self, resource: str, *args: Any, **kwargs: Any) -> Any:
        return await self.call(getattr(self.client, resource).retrieve, *args, **kwargs)

    async def token(self) -> str:
        token: str = await self.call(self.client.access_token)
        return token

    async def collect(self, resource: str, **filters: Any) -> List[Any]:
        items, failure = await self.collect_until_error(resource, **filters)
        if failure is not None:
            raise failure
        return items

    async def collect_until_error(
        self, resource: str, **filters: Any
    ) -> Tuple[List[Any], Optional[Exception]]:
        """The items a list yields, and the error that ended it (if one did)."""
        items: List[Any] = []
        listing = getattr(self.client, resource).list(**filters)
        try:
            if self.is_async:
                async for item in listing:
                    items.append(item)
            else:

                def drain() -> None:
                    for item in listing:
                        items.append(item)

                await anyio.to_thread.run_sync(drain)
        except payrail.PayrailError as err:
            return items, err
        return items, None

    async def close(self) -> None:
        if self.is_async:
            await self.client.aclose()
        else:
            self.client.close()


Factory = Callable[..., Api]


@pytest.fixture(params=["sync", "async"])
async def make_api(request: pytest.FixtureRequest, server: Server) -> AsyncIterator[Factory]:
    """Makes a client of the flavour under test, against the scripted server (no backoff to
    speak of, unless a test asks for it)."""
    made: List[Api] = []
    is_async = request.param == "async"

    def make(**options: Any) -> Api:
        settings: dict[str, Any] = {"initial_backoff": 0.001, "max_backoff": 0.01}
        settings.update(options)
        base = settings.pop("base_url", server.url)
        kind = payrail.AsyncClient if is_async else payrail.Client
        api = Api(kind(base, ID, SECRET, **settings), is_async)
        made.append(api)
        return api

    yield make
    for api in made:
        await api.close()
