"""Everything the clients decide, without doing any I/O: shared by :class:`payrail.Client`
and :class:`payrail.AsyncClient`.

A call is a *plan*: a generator that yields what it needs done (:class:`Send` a request,
:class:`Sleep`, :class:`NeedToken`) and is sent back the outcome. The plan owns every rule
(which answers are retried and after how long, the one refetch of the token on a 401, error
bodies into typed errors, the bookmark, the decoding); the sync and async clients only carry
plans out, one with ``httpx.Client`` and ``time.sleep``, the other with ``httpx.AsyncClient``
and ``asyncio.sleep``. So the two cannot drift apart, and the rules are tested once.
"""

from __future__ import annotations

import base64
import email.utils
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import timezone
from enum import Enum
from typing import (
    Any,
    Callable,
    Dict,
    Generator,
    Generic,
    Iterable,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)
from urllib.parse import quote, urlencode

import httpx

from . import _params
from ._config import RetryPolicy, Secret, base_url, scope_text, timeouts
from ._version import VERSION
from ._wire import Kind, Member, decode_members
from .errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    ConfigError,
    ConflictError,
    DecodeError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
)
from .models import (
    CheckoutSession,
    ErrorBody,
    Event,
    Merchant,
    Page,
    Scope,
    TokenResponse,
    Transaction,
    list_members,
)

#: Most bytes of an answer the client reads (a page of 100 transactions is about 200 KB);
#: a larger one is refused as soon as it is seen to be, by its ``Content-Length`` or while it
#: is read, so a broken or hostile server cannot exhaust memory.
MAX_ANSWER_BYTES = 8 * 1024 * 1024

#: A token is refreshed this long before it expires (or at half its life, if shorter), so a
#: request never leaves with a token that dies on the way.
REFRESH_MARGIN = 60.0

USER_AGENT = f"payrail-python/{VERSION}"

T = TypeVar("T")
C = TypeVar("C", int, str)


# --- Steps of a plan ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """A request to make."""

    method: str
    url: httpx.URL
    #: Kept out of ``repr``: it holds the credentials.
    headers: Tuple[Tuple[str, str], ...] = field(repr=False)
    content: Optional[bytes] = field(default=None, repr=False)

    @property
    def where(self) -> str:
        """What the request was, for messages: method and path, never the query."""
        return f"{self.method} {self.url.path}"


@dataclass(frozen=True)
class Answer:
    """An HTTP answer, read whole (within :data:`MAX_ANSWER_BYTES`)."""

    status: int
    headers: httpx.Headers
    body: bytes = field(repr=False)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def request_id(self) -> Optional[str]:
        return self.headers.get(_params.REQUEST_ID_HEADER) or None


@dataclass(frozen=True)
class Failure:
    """A request that got no answer."""

    error: APIConnectionError
    #: Nothing was sent (the connection was never made): safe to retry any request.
    before_sending: bool


@dataclass(frozen=True)
class Send:
    """Step: make ``request``; the outcome is an :class:`Answer` or a :class:`Failure`."""

    request: Request


@dataclass(frozen=True)
class Sleep:
    """Step: wait ``seconds``; the outcome is ``None``."""

    seconds: float


class NeedToken:
    """Step: an access token (the cached one, or one fetched under the client's lock); the
    outcome is the token."""


NEED_TOKEN = NeedToken()

Step = Union[Send, Sleep, NeedToken]
Plan = Generator[Step, Any, T]


def failure(request: Request, exc: httpx.TransportError) -> Failure:
    """A transport failure as the error it becomes."""
    where = request.where
    error: APIConnectionError
    if isinstance(exc, httpx.ConnectTimeout):
        error, before = APITimeoutError(f"{where}: timed out connecting"), True
    elif isinstance(exc, httpx.TimeoutException):
        error, before = APITimeoutError(f"{where}: timed out"), False
    elif isinstance(exc, httpx.ConnectError):
        error, before = APIConnectionError(f"{where}: could not connect ({exc})"), True
    else:
        error, before = APIConnectionError(f"{where}: {type(exc).__name__} ({exc})"), False
    error.__cause__ = exc
    return Failure(error, before)


def too_slow(request: Request, seconds: float) -> Failure:
    return Failure(APITimeoutError(f"{request.where}: the answer took over {seconds:g} s"), False)


def too_large(status: int, headers: httpx.Headers) -> DecodeError:
    return DecodeError(
        f"the answer is larger than {MAX_ANSWER_BYTES} bytes",
        status=status,
        request_id=headers.get(_params.REQUEST_ID_HEADER) or None,
    )


#: RFC 6750 2.1's ``b64token``.
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")
#: A count of seconds or bytes as HTTP writes it: ASCII digits only (``str.isdigit`` also takes
#: ``"²"``), and few enough that ``int`` reads them.
_DIGITS = re.compile(r"[0-9]{1,15}")


def declared_length(headers: httpx.Headers) -> Optional[int]:
    value = headers.get("content-length")
    if value is None or not _DIGITS.fullmatch(value.strip()):
        return None
    return int(value)


# --- Reading answers ---------------------------------------------------------------------------


def retry_after(headers: httpx.Headers, now: Optional[float] = None) -> Optional[float]:
    """``Retry-After`` in seconds: a number, or an HTTP date."""
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if _DIGITS.fullmatch(value):
        return float(int(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def parse_json(answer: Answer) -> Any:
    try:
        return json.loads(answer.body)
    except (ValueError, RecursionError):
        raise DecodeError(
            "the answer is not JSON", status=answer.status, request_id=answer.request_id
        ) from None


def decode(answer: Answer, read: Callable[[Any, str], T], what: str) -> T:
    """An answer read as ``what``; a mismatch with the contract is a :class:`DecodeError`."""
    value = parse_json(answer)
    try:
        return read(value, what)
    except DecodeError as err:
        raise DecodeError(
            err.message, status=answer.status, request_id=answer.request_id
        ) from None


_ERRORS_BY_STATUS = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    429: RateLimitError,
}


def api_error(answer: Answer, wait: Optional[float] = None) -> APIError:
    """An error answer as the typed error it stands for."""
    kind = _ERRORS_BY_STATUS.get(answer.status)
    if kind is None:
        kind = ServerError if answer.status >= 500 else APIError
    code: Optional[str]
    try:
        body = ErrorBody._from_wire(json.loads(answer.body), "error")
        error = body.error
        code = error.value if isinstance(error, Enum) else error
        description = body.error_description or ""
    except (ValueError, RecursionError, DecodeError):
        code = None
        snippet = answer.body[:200].decode("utf-8", "replace")
        snippet = " ".join("".join(c if c.isprintable() else " " for c in snippet).split())
        description = "the answer has no Payrail error body" + (f": {snippet}" if snippet else "")
    if wait is None and answer.status == 429:
        wait = retry_after(answer.headers)
    return kind(
        answer.status, code, description, request_id=answer.request_id, retry_after=wait
    )


# --- Lists -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ListSpec(Generic[T, C]):
    """A list operation: its path, and the envelope its pages are read by."""

    path: str
    members: Tuple[Member, ...]

    def read(self, value: Any, where: str) -> Page[T, C]:
        return Page(**decode_members(self.members, value, where))


TRANSACTIONS: ListSpec[Transaction, int] = ListSpec(
    "v1/transactions", list_members(Transaction, Kind.INTEGER)
)
MERCHANTS: ListSpec[Merchant, int] = ListSpec("v1/merchants", list_members(Merchant, Kind.INTEGER))
EVENTS: ListSpec[Event, str] = ListSpec("v1/events", list_members(Event, Kind.STRING))


class Pager(Generic[T, C]):
    """Follows ``next_cursor`` page by page, and refuses a page that cannot be followed
    (``has_more`` without a cursor, on an empty page, or with the cursor it started from)
    rather than repeat pages or stop early unnoticed."""

    def __init__(self, params: List[Tuple[str, str]]) -> None:
        self.params = params
        self.done = False
        self._cursor = dict(params).get("starting_after")
        # Every cursor followed: one seen before means pages going round in a loop.
        self._seen = {self._cursor} if self._cursor is not None else set()

    def accept(self, page: Page[T, C]) -> Tuple[T, ...]:
        """The items of ``page``, having moved on to the next page (or to the end)."""
        if not page.has_more:
            self.done = True
            return page.data
        cursor = page.next_cursor
        if cursor is None:
            problem = "has_more without a next_cursor"
        elif not page.data:
            problem = "has_more on an empty page"
        elif str(cursor) in self._seen:
            problem = "a next_cursor seen before"
        else:
            self._cursor = str(cursor)
            self._seen.add(self._cursor)
            self.params = _params.merge(self.params, {"starting_after": self._cursor})
            return page.data
        raise DecodeError(f"a list page that cannot be followed: {problem}", status=200)


# --- The client's state and its plans ----------------------------------------------------------


@dataclass
class _CachedToken:
    value: str = field(repr=False)
    refresh_at: float


class Core:
    """One client's settings, token cache and bookmark, and the plans of its calls."""

    def __init__(
        self,
        base: str,
        client_id: str,
        client_secret: str,
        *,
        scope: Union[str, Iterable[Union[Scope, str]], None],
        timeout: float,
        connect_timeout: float,
        retry: RetryPolicy,
    ) -> None:
        self.base = base_url(base)
        if not isinstance(client_id, str) or not client_id:
            raise ConfigError("client_id must be the client's id (cli_...)")
        if not isinstance(client_secret, str) or not client_secret:
            raise ConfigError("client_secret must be the client's secret")
        self.client_id = client_id
        self._secret = Secret(client_secret)
        self.scope = scope_text(scope)
        self.timeout = timeouts(timeout, connect_timeout)
        #: The longest one request may take, body included.
        self.total_timeout = float(timeout)
        self.retry = retry
        # Guards the token and the bookmark; held for a few instructions, never across I/O
        # (the client's own lock makes token fetches one at a time).
        self._state = threading.Lock()
        self._token: Optional[_CachedToken] = None
        self._bookmark: Optional[str] = None

    def __repr__(self) -> str:
        return f"Core(base_url={str(self.base)!r}, client_id={self.client_id!r})"

    # Token cache.

    def cached_token(self, now: Optional[float] = None) -> Optional[str]:
        """The cached token while it is fresh."""
        now = time.monotonic() if now is None else now
        with self._state:
            token = self._token
        return token.value if token is not None and now < token.refresh_at else None

    def store_token(self, issued: TokenResponse, now: Optional[float] = None) -> str:
        now = time.monotonic() if now is None else now
        lifetime = float(max(issued.expires_in, 0))
        # A short-lived token is refreshed at half its life rather than never cached.
        refresh_at = now + lifetime - min(REFRESH_MARGIN, lifetime / 2)
        with self._state:
            self._token = _CachedToken(issued.access_token, refresh_at)
        return issued.access_token

    def forget_token(self, used: str) -> None:
        """Drops the cached token if it is still ``used`` (another caller may have replaced
        it already)."""
        with self._state:
            if self._token is not None and self._token.value == used:
                self._token = None

    # Bookmark.

    @property
    def bookmark(self) -> Optional[str]:
        with self._state:
            return self._bookmark

    def remember_bookmark(self, answer: Answer) -> None:
        value = answer.headers.get(_params.BOOKMARK_HEADER)
        # Only a value shaped like a bookmark: sending back anything else would be a 400.
        if value and len(value) <= 128 and all(c.isascii() and (c.isalnum() or c == "-") for c in value):
            with self._state:
                self._bookmark = value

    # Requests.

    def url(self, path: str, params: Sequence[Tuple[str, str]] = ()) -> httpx.URL:
        url = self.base.join(path)
        if params:
            url = url.copy_with(query=urlencode(list(params), quote_via=quote, safe="").encode())
        return url

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Sequence[Tuple[str, str]] = (),
        json_body: Any = None,
        token: Optional[str] = None,
        bookmark: bool = False,
    ) -> Request:
        headers = [("Accept", "application/json"), ("User-Agent", USER_AGENT)]
        content = None
        if json_body is not None:
            content = json.dumps(json_body, separators=(",", ":")).encode()
            headers.append(("Content-Type", "application/json"))
        if token is not None:
            headers.append(("Authorization", f"Bearer {token}"))
        if bookmark:
            current = self.bookmark
            if current is not None:
                headers.append((_params.BOOKMARK_HEADER, current))
        return Request(method, self.url(path, params), tuple(headers), content)

    def token_request(self) -> Request:
        form = [("grant_type", "client_credentials")]
        if self.scope is not None:
            form.append(("scope", self.scope))
        # RFC 6749 2.3.1: the id and the secret are form-encoded before they are joined.
        pair = f"{_form(self.client_id)}:{_form(self._secret.reveal())}"
        basic = base64.b64encode(pair.encode()).decode("ascii")
        headers = (
            ("Accept", "application/json"),
            ("User-Agent", USER_AGENT),
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Authorization", f"Basic {basic}"),
        )
        return Request("POST", self.url("oauth/token"), headers, urlencode(form).encode())

    # Plans.

    def with_retries(self, request: Request, idempotent: bool) -> Plan[Answer]:
        """Sends until the answer is final: 429 is retried (after ``Retry-After`` when given),
        and so are 5xx and network failures of ``idempotent`` requests, and failures to
        connect of any. Answers a success or a 401 (the caller decides about the token);
        raises the typed error of any other answer."""
        attempt = 0
        while True:
            outcome = yield Send(request)
            if isinstance(outcome, Answer):
                if outcome.ok or outcome.status == 401:
                    return outcome
                wait = retry_after(outcome.headers)
                retryable = outcome.status == 429 or (outcome.status >= 500 and idempotent)
                delay = self.retry.delay(attempt, wait) if retryable else None
                if delay is None:
                    raise api_error(outcome, wait)
            else:
                assert isinstance(outcome, Failure)
                retryable = outcome.before_sending or idempotent
                delay = self.retry.delay(attempt, None) if retryable else None
                if delay is None:
                    raise outcome.error
            yield Sleep(delay)
            attempt += 1

    def token_plan(self) -> Plan[TokenResponse]:
        """Fetches a token (the client's lock is held meanwhile)."""
        answer = yield from self.with_retries(self.token_request(), idempotent=True)
        if not answer.ok:
            raise api_error(answer)
        issued = decode(answer, TokenResponse._from_wire, "token")
        # A bearer token's characters (RFC 6750 2.1): anything else would be refused when the
        # header is built, in a message that repeats it.
        if not _BEARER_TOKEN.fullmatch(issued.access_token):
            raise DecodeError(
                "a token answer whose access_token is not a bearer token",
                status=answer.status,
                request_id=answer.request_id,
            )
        return issued

    def call(
        self,
        build: Callable[[Optional[str]], Request],
        *,
        authorized: bool,
        idempotent: bool,
    ) -> Plan[Answer]:
        """Sends the request ``build`` makes for a token (``None`` when not ``authorized``): a
        401 gets a fresh token and one more try."""
        refreshed = False
        while True:
            token: Optional[str] = None
            if authorized:
                token = yield NEED_TOKEN
            answer = yield from self.with_retries(build(token), idempotent)
            if token is not None and answer.status == 401 and not refreshed:
                self.forget_token(token)
                refreshed = True
                continue
            if not answer.ok:
                raise api_error(answer)
            return answer

    def read(
        self,
        path: str,
        params: Sequence[Tuple[str, str]],
        reader: Callable[[Any, str], T],
        what: str,
    ) -> Plan[T]:
        """A read (``GET``): it carries the last bookmark an answer gave, so that it sees at
        least what the reads before it saw, and keeps the one it is answered with."""
        answer = yield from self.call(
            lambda token: self.request("GET", path, params=params, token=token, bookmark=True),
            authorized=True,
            idempotent=True,
        )
        self.remember_bookmark(answer)
        return decode(answer, reader, what)

    def page(self, spec: ListSpec[T, C], params: Sequence[Tuple[str, str]]) -> Plan[Page[T, C]]:
        return self.read(spec.path, params, spec.read, spec.path)

    def retrieve_merchant(self, id: int) -> Plan[Optional[Merchant]]:
        if isinstance(id, bool) or not isinstance(id, int):
            raise TypeError(f"id: expected an int, got {type(id).__name__}")
        try:
            merchant = yield from self.read(
                f"v1/merchants/{id}", (), Merchant._from_wire, "merchant"
            )
        except NotFoundError:
            return None
        return merchant

    def retrieve_event(self, id: str) -> Plan[Optional[Event]]:
        if not isinstance(id, str) or not id:
            raise TypeError("id: expected an event id (evt_...)")
        try:
            event = yield from self.read(
                f"v1/events/{quote(id, safe='')}", (), Event._from_wire, "event"
            )
        except NotFoundError:
            return None
        return event

    def retrieve_transaction(self, id: int) -> Plan[Optional[Transaction]]:
        # Without an id the filter would fall away and the page's first row come back.
        if isinstance(id, bool) or not isinstance(id, int):
            raise TypeError(f"id: expected an int, got {type(id).__name__}")
        params = _params.query(_params.TRANSACTION_FILTERS, id=id)
        page = yield from self.page(TRANSACTIONS, params)
        return page.data[0] if page.data else None

    def create_checkout(self, body: Dict[str, Any]) -> Plan[CheckoutSession]:
        # With an idempotency key a repeat returns the same session, so it is safe to retry.
        idempotent = body.get("idempotencyKey") is not None
        answer = yield from self.call(
            lambda _: self.request("POST", "checkout/sessions", json_body=body),
            authorized=False,
            idempotent=idempotent,
        )
        return decode(answer, CheckoutSession._from_wire, "checkout session")

    def sandbox(self, id: int, action: str, body: Dict[str, str]) -> Plan[Transaction]:
        if isinstance(id, bool) or not isinstance(id, int):
            raise TypeError(f"id: expected an int, got {type(id).__name__}")
        answer = yield from self.call(
            lambda token: self.request(
                "POST", f"sandbox/transactions/{id}/{action}", json_body=body, token=token
            ),
            authorized=True,
            idempotent=False,
        )
        return decode(answer, Transaction._from_wire, "transaction")


def _form(text: str) -> str:
    """``text`` form-encoded (``application/x-www-form-urlencoded``)."""
    return urlencode({"": text})[1:]

