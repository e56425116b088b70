"""A scripted local HTTP server for the clients' behaviour tests.

Each route answers from a script: a list of replies used in turn (the last one repeats), or
a function of the request. Every request is recorded (method, path, query, headers, body and
when it arrived), so that a test can assert what the client sent and when, without mocking
the transport: the clients' real httpx stack talks to a real socket.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Tuple, Union
from urllib.parse import parse_qsl, urlsplit


@dataclass
class Reply:
    """What a route answers."""

    status: int = 200
    json: Any = None
    body: Optional[bytes] = None
    headers: Dict[str, str] = field(default_factory=dict)
    #: Seconds before answering (cut short when the server stops).
    delay: float = 0.0
    #: Sent with chunked transfer encoding (no Content-Length), in chunks of this many bytes.
    chunk: Optional[int] = None
    #: Seconds between chunks.
    chunk_delay: float = 0.0
    #: A Content-Length claimed for a body that is never sent (the connection then closes).
    claimed_length: Optional[int] = None

    def payload(self) -> bytes:
        if self.body is not None:
            return self.body
        if self.json is not None:
            return json.dumps(self.json).encode()
        return b""


@dataclass
class Seen:
    """A request the server received."""

    method: str
    path: str
    query: List[Tuple[str, str]]
    headers: Dict[str, str]
    body: bytes
    at: float

    def header(self, name: str) -> Optional[str]:
        return self.headers.get(name.lower())

    @property
    def params(self) -> Dict[str, str]:
        return dict(self.query)


Script = Union[List[Reply], Callable[[Seen], Reply]]


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout) leaves the handler a closed socket: not an error.
        pass


class Server:
    """The server: ``on(method, path, *replies)`` scripts a route; ``seen(path)`` lists what
    arrived there."""

    def __init__(self) -> None:
        self._routes: Dict[Tuple[str, str], Script] = {}
        self._seen: List[Seen] = []
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server._handle(self)

            def do_POST(self) -> None:
                server._handle(self)

        self._http = _Quiet(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Server:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    def on(self, method: str, path: str, *replies: Reply) -> None:
        with self._lock:
            self._routes[(method, path)] = list(replies)

    def on_call(self, method: str, path: str, script: Callable[[Seen], Reply]) -> None:
        with self._lock:
            self._routes[(method, path)] = script

    def seen(self, path: Optional[str] = None) -> List[Seen]:
        with self._lock:
            return [s for s in self._seen if path is None or s.path == path]

    def issue_tokens(self, *, expires_in: int = 3600, delay: float = 0.0) -> None:
        """Scripts the token endpoint to issue ``tok-1``, ``tok-2``, ... in turn."""

        def token(seen: Seen) -> Reply:
            count = len(self.seen("/oauth/token"))
            return Reply(
                json={
                    "access_token": f"tok-{count}",
                    "token_type": "Bearer",
                    "expires_in": expires_in,
                    "scope": "transactions:read merchants:read events:read",
                },
                delay=delay,
            )

        self.on_call("POST", "/oauth/token", token)

    def _reply_for(self, seen: Seen) -> Reply:
        with self._lock:
            self._seen.append(seen)
            script = self._routes.get((seen.method, seen.path))
            if script is None:
                return Reply(404, {"error": "not_found", "error_description": "no such route"})
            if callable(script):
                pass
            elif len(script) > 1:
                return script.pop(0)
            else:
                return script[0]
        return script(seen)

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        parts = urlsplit(handler.path)
        seen = Seen(
            method=handler.command,
            path=parts.path,
            query=parse_qsl(parts.query, keep_blank_values=True),
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=body,
            at=time.monotonic(),
        )
        reply = self._reply_for(seen)
        if reply.delay and self.stopping.wait(reply.delay):
            return
        payload = reply.payload()
        handler.send_response(reply.status)
        if reply.json is not None:
            handler.send_header("Content-Type", "application/json")
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        if reply.claimed_length is not None:
            handler.send_header("Content-Length", str(reply.claimed_length))
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.close_connection = True
            return
        if reply.chunk:
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            try:
                for start in range(0, len(payload), reply.chunk):
                    if reply.chunk_delay and self.stopping.wait(reply.chunk_delay):
                        return
                    piece = payload[start : start + reply.chunk]
                    handler.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    handler.wfile.flush()
                handler.wfile.write(b"0\r\n\r\n")
            except OSError:
                handler.close_connection = True
            return
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        try:
            handler.wfile.write(payload)
        except OSError:
            handler.close_connection = True


def transaction(id: int, **changes: Any) -> Dict[str, Any]:
    """A transaction as the API shows it."""
    value: Dict[str, Any] = {
        "object": "transaction",
        "id": id,
        "merchant_id": 1,
        "status": "paid",
        "raw_status": "paid",
        "amount_status": "EXACT",
        "asset": "USDC",
        "currency": "EUR",
        "amount": {
            "gross": "40.00",
            "net": "39.60",
            "expected": "40.00",
            "psp_fee": "0.40",
            "gas_fee": "0.00",
            "bridge_fee": None,
        },
        "networks": {"payment": "polygon", "settlement": "polygon"},
        "tx_hashes": {"source": "0x1", "bridge": None, "settlement": "0x2"},
        "customer_email": None,
        "external_reference": f"order-{id}",
        "created_at": "2026-11-21T04:35:27Z",
        "paid_at": "2026-11-21T04:36:00Z",
    }
    value.update(changes)
    return value


def merchant(id: int, **changes: Any) -> Dict[str, Any]:
    """A merchant as the API shows it."""
    value: Dict[str, Any] = {
        "object": "merchant",
        "id": id,
        "name": f"Shop {id}",
        "legal_name": f"Shop {id} Ltd",
        "email": f"shop{id}@example.com",
        "public_key": f"pk_live_{id:016d}",
        "psp_reference_id": f"ref-{id}",
        "status": "active",
        "onboarding_status": "completed",
        "crypto_enabled": True,
        "onboarding_complete": True,
        "created_at": "2026-01-02T03:04:05Z",
    }
    value.update(changes)
    return value


def event(id: str, type: str, data: Any) -> Dict[str, Any]:
    return {"id": id, "type": type, "created": 1795000000, "data": data}


def page(items: List[Any], *, has_more: bool = False, next_cursor: Any = None) -> Dict[str, Any]:
    return {"object": "list", "data": items, "has_more": has_more, "next_cursor": next_cursor}


def error(code: str, description: str) -> Dict[str, Any]:
    return {"error": code, "error_description": description}
