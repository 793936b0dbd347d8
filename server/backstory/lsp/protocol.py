"""The JSON-RPC layer under the server: every request is answered, memory does not grow with requests, and broken
framing costs one message, not the connection.

pygls (2.1.1) does the LSP work; this module fixes what its transport does not:

- **Unanswered requests.** pygls structures a message inside ``json.loads``' object hook; when that fails (a
  hover with ``params: null``, a code action whose range is ``7``) it logs and drops the message, and the
  client waits forever. Here the envelope is checked first and every request gets a response: ``-32700``
  for text that is not JSON, ``-32600`` for an envelope that is not a request (an object as id, a number as
  method), ``-32602`` for params that do not fit the method, ``-32002`` before ``initialize``.
- **Futures kept forever.** pygls registers the future of every coroutine or thread handler under its
  message id, and only a client request's own completion removes it; handlers pygls calls itself (the user
  command inside ``workspace/executeCommand``, async notification handlers) run under fresh ids nothing
  removes, so each command left a completed future (and its result) behind: 1,200 searches grew the server
  from 220 to 679 MB. Here each such future is dropped when it completes, so the table holds the requests
  in flight and nothing else.
- **Framing.** pygls reads a header only at the start of a line and only as ``Content-Length: <digits>``; a
  message without one, or with a length too short, left the rest of it glued to the next header, and every
  message after that was lost. Here a ``Content-Length`` header is found wherever it starts, a bad one
  costs its own message (answered when its id can be read), and a body that is not JSON is answered with a
  parse error before the reader moves on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Awaitable, Generator
from concurrent.futures import Future
from functools import partial
from typing import Any, Protocol

import cattrs
from lsprotocol import types
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
NOT_INITIALIZED = -32002
MAX_MESSAGE_BYTES = 64 << 20  # a larger Content-Length is refused (and its body skipped) rather than buffered
_HEADER = re.compile(rb"content-length:[ \t]*([^\r\n]*)", re.IGNORECASE)
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,15}|"(?:[^"\\\r\n]|\\.){0,200}")')
_SURROGATE = re.compile("[\ud800-\udfff]")


class Reader(Protocol):
    def readline(self) -> Awaitable[bytes]: ...

    def readexactly(self, n: int) -> Awaitable[bytes]: ...


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _has_surrogate(value: Any) -> bool:
    """Whether a parsed JSON value holds an unpaired UTF-16 surrogate (``"\\ud800"``): not Unicode text."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    return False


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    return value


class BackstoryProtocol(LanguageServerProtocol):
    """pygls' language server protocol with the three repairs described in the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initialize_seen = False
        self.messages = 0  # messages read from the client, and when the last one came (see server._give_heap_back)
        self.last_message = time.monotonic()

    # -- futures ------------------------------------------------------------------------------------------

    def _execute_handler(self, msg_id: Any, handler: Any, callback: Any, args: Any = None, kwargs: Any = None) -> None:
        before = self._request_futures.get(msg_id)
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None and future is not before:
            try:
                loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            future.add_done_callback(partial(self._forget, loop, msg_id))

    def _forget(self, loop: asyncio.AbstractEventLoop | None, msg_id: Any, future: Future[Any]) -> None:
        """Drop a finished future, on the event loop: a future's callbacks can run inside ``cancel()``, which
        pygls calls while it iterates the table (``shutdown``), or in a worker thread."""
        if loop is None or loop.is_closed():
            self._drop(msg_id, future)
        else:
            loop.call_soon_threadsafe(self._drop, msg_id, future)

    def _drop(self, msg_id: Any, future: Future[Any]) -> None:
        if self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """pygls' shutdown, cancelling what is in flight over a copy of the table: a cancelled future's callbacks
        run inside ``cancel()`` and may remove it (pygls' own result callback does)."""
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    def in_flight(self) -> int:
        """Requests (the client's and the server's own) whose answers are still awaited."""
        return len(self._request_futures)

    # -- messages -----------------------------------------------------------------------------------------

    def reply_error(self, msg_id: Any, code: int, message: str) -> None:
        """An error response written as JSON-RPC says (``"id": null`` when the id could not be read)."""
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    def accept(self, body: bytes) -> bool:
        """Handle one framed message; a request always gets a response. False when ``body`` is not JSON (the
        caller decides how to answer: the frame may have been cut wrong)."""
        self.messages += 1
        self.last_message = time.monotonic()
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return False
        if not isinstance(data, dict):
            self.reply_error(None, INVALID_REQUEST, "a message must be a JSON object (batches are not supported)")
            return True
        has_id, method = "id" in data, data.get("method")
        if has_id and not _valid_id(data["id"]) and data["id"] is not None:
            self.reply_error(None, INVALID_REQUEST, "'id' must be a string or an integer")
            return True
        msg_id = data.get("id")
        request = has_id and "method" in data
        if "method" in data and not isinstance(method, str):
            if request:
                self.reply_error(msg_id, INVALID_REQUEST, "'method' must be a string")
            return True
        if data.get("jsonrpc") != "2.0":
            if request:
                self.reply_error(msg_id, INVALID_REQUEST, "'jsonrpc' must be \"2.0\"")
            return True
        if request and msg_id is None:
            self.reply_error(None, INVALID_REQUEST, "a request's 'id' must be a string or an integer, not null")
            return True
        if request and self._shutdown and method != types.EXIT:
            self.reply_error(msg_id, INVALID_REQUEST, "the server is shutting down: only 'exit' is accepted")
            return True
        if not self.initialize_seen and method not in (types.INITIALIZE, types.EXIT) and "method" in data:
            if request:
                self.reply_error(msg_id, NOT_INITIALIZED, "the server is not initialized: send 'initialize' first")
            return True  # notifications before initialize are dropped (LSP)
        if _has_surrogate(data):
            if request:
                self.reply_error(msg_id, INVALID_PARAMS, "the params hold an unpaired UTF-16 surrogate (not text)")
                return True
            data = _replace_surrogates(data)
        try:
            message = self.structure_message(data)
        except Exception as e:
            self._refuse(data, e)
            return True
        if request and method == types.INITIALIZE:
            self.initialize_seen = True
        self.handle_message(message)
        return True

    def _refuse(self, data: dict[str, Any], error: Exception) -> None:
        cause = error.__cause__ if error.__cause__ is not None else error
        try:
            detail = "; ".join(cattrs.transform_error(cause))  # type: ignore[arg-type]
        except Exception:
            detail = str(cause) or type(cause).__name__
        if "method" in data and "id" in data:
            self.reply_error(data["id"], INVALID_PARAMS, f"invalid params for {data['method']}: {detail[:500]}")
        else:
            log.warning("dropped a message that does not fit its method: %s", detail[:500])


class _Buffered:
    """A reader with bytes pushed back in front (the overrun of a too-long Content-Length)."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.pending = b""

    def unread(self, data: bytes) -> None:
        self.pending = data + self.pending

    async def readline(self) -> bytes:
        if b"\n" in self.pending:
            line, _, self.pending = self.pending.partition(b"\n")
            return line + b"\n"
        line, self.pending = self.pending + await self.reader.readline(), b""
        return line

    async def readexactly(self, n: int) -> bytes:
        head, self.pending = self.pending[:n], self.pending[n:]
        if len(head) == n:
            return head
        rest = await self.reader.readexactly(n - len(head))
        return head + rest if rest else head if len(head) == n else b""


async def serve(stop: threading.Event, raw: Reader, protocol: BackstoryProtocol) -> None:
    """Read framed messages until end of input, recovering from broken framing (see the module docstring)."""
    reader = _Buffered(raw)
    length: int | None = None
    loose = b""  # bytes outside any frame: a message sent without (or with a wrong) Content-Length
    while not stop.is_set():
        line = await reader.readline()
        if not line:
            break
        headers = list(_HEADER.finditer(line))
        found = headers[-1] if headers else None
        if found is not None:
            _answer_loose(protocol, loose + line[: found.start()])
            loose = b""
            value = found.group(1).strip()
            length = int(value) if value.isdigit() else None  # not a number: the body becomes loose bytes
            continue
        if line.strip():
            if length is None and not loose and b":" in line and not line.lstrip().startswith((b"{", b"[")):
                continue  # another header (Content-Type) of a message whose length comes next, or never
            loose += line
            continue
        if length is None:  # the blank line after headers without a usable length
            continue
        size, length = length, None
        if size > MAX_MESSAGE_BYTES:
            for start in range(0, size, 1 << 20):
                if not await reader.readexactly(min(1 << 20, size - start)):
                    return
            protocol.reply_error(None, INVALID_REQUEST, f"a message of {size:,} bytes is over the limit")
            continue
        body = await reader.readexactly(size) if size else b""
        if size and not body:
            break
        try:
            _take(protocol, reader, body)
        except Exception:
            log.exception("failed to handle a message")
    _answer_loose(protocol, loose)


def _take(protocol: BackstoryProtocol, reader: _Buffered, body: bytes) -> None:
    """Hand a body to the protocol. One that is not JSON was cut wrong: if a complete message is followed by
    the next one's header (a Content-Length too long), take the first and read the rest again; otherwise
    answer with a parse error (naming the request when its id can be read)."""
    if protocol.accept(body):
        return
    for found in _HEADER.finditer(body):
        if found.start() and protocol.accept(body[: found.start()]):
            reader.unread(body[found.start() :])
            return
    found_id = _ID.search(body)
    msg_id = json.loads(found_id.group(1)) if found_id else None
    protocol.reply_error(msg_id, PARSE_ERROR, "the message is not JSON (is its Content-Length right?)")


def _answer_loose(protocol: BackstoryProtocol, loose: bytes) -> None:
    """Bytes that arrived outside a frame: if they hold a request, answer it (its framing was wrong)."""
    text = loose.strip()
    if not text:
        return
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        data = None
    found = _ID.search(text)
    msg_id = data.get("id") if isinstance(data, dict) else json.loads(found.group(1)) if found else None
    if isinstance(data, dict) and "method" not in data:
        return  # a response without framing: nothing to answer
    if msg_id is not None and not _valid_id(msg_id):
        msg_id = None
    protocol.reply_error(msg_id, INVALID_REQUEST, "the message had no valid Content-Length header; it was not read")
