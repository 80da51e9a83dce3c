"""A small OpenAI-compatible server for tests: ``POST /v1/chat/completions`` on 127.0.0.1,
non-streaming and streaming (SSE), answering from a script and recording every request.

Replies are taken in order from the model's script (``script(model, ...)``), else from the
default script, else from ``responder(body)``; each is a ``Text``, a ``Status`` (an HTTP
error such as 429, 500, 401) or a ``Hang`` (sleep past the client's timeout).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Text:
    content: str
    prompt_tokens: int = 100
    completion_tokens: int = 50
    delay_s: float = 0.0


@dataclass(frozen=True)
class Status:
    code: int
    message: str = "scripted error"


@dataclass(frozen=True)
class Hang:
    seconds: float


Reply = Text | Status | Hang


@dataclass
class Recorded:
    body: dict[str, Any]
    authorization: str

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def prompt(self) -> str:
        return "\n".join(m["content"] for m in self.body.get("messages", []))


@dataclass
class FakeOpenAI:
    # The bearer key it requires ("" = none: a local server that needs no key).
    api_key: str = "sk-test-key"
    responder: Callable[[dict[str, Any]], Reply] | None = None
    requests: list[Recorded] = field(default_factory=list)
    _scripts: dict[str, list[Reply]] = field(default_factory=dict)
    # Most requests being answered at the same moment (the client's concurrency limit).
    max_concurrent: int = 0
    _active: int = 0
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, *replies: Reply, model: str = "") -> FakeOpenAI:
        with self._lock:
            self._scripts.setdefault(model, []).extend(replies)
        return self

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            for key in (str(body.get("model", "")), ""):
                if self._scripts.get(key):
                    return self._scripts[key].pop(0)
        if self.responder is not None:
            return self.responder(body)
        return Status(500, "script exhausted")

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                auth = self.headers.get("Authorization", "")
                with fake._lock:
                    fake.requests.append(Recorded(body, auth))
                if not self.path.endswith("/chat/completions"):
                    return self._json(404, {"error": {"message": "not found"}})
                if fake.api_key and auth != f"Bearer {fake.api_key}":
                    return self._json(401, {"error": {"message": "invalid api key", "type": "invalid_request_error",
                                                      "code": "invalid_api_key"}})
                reply = fake.next_reply(body)
                with fake._lock:
                    fake._active += 1
                    fake.max_concurrent = max(fake.max_concurrent, fake._active)
                try:
                    self._answer(body, reply)
                finally:
                    with fake._lock:
                        fake._active -= 1

            def _answer(self, body: dict[str, Any], reply: Reply) -> None:
                if isinstance(reply, Hang):
                    time.sleep(reply.seconds)  # the client has given up and closed the connection
                    self.close_connection = True
                    return
                if isinstance(reply, Status):
                    return self._json(reply.code, {"error": {"message": reply.message}})
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if body.get("stream"):
                    return self._stream(body, reply)
                return self._json(200, {
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply.content}}],
                    "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                              "total_tokens": reply.prompt_tokens + reply.completion_tokens}})

            def _json(self, code: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], reply: Text) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}
                text = reply.content
                pieces = [text[i:i + 40] for i in range(0, len(text), 40)] or [""]
                for piece in pieces:
                    chunk = {**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                final = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                self.wfile.write(f"data: {json.dumps(final)}\n\n".encode())
                usage = {**base, "choices": [], "usage": {"prompt_tokens": reply.prompt_tokens,
                                                          "completion_tokens": reply.completion_tokens,
                                                          "total_tokens": reply.prompt_tokens
                                                          + reply.completion_tokens}}
                self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
