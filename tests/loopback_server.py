"""A real OpenAI-compatible HTTP server on 127.0.0.1 for driving litellm in tests.

Serves ``POST /v1/chat/completions``: streaming (SSE ``data: {...}`` lines ending with
``data: [DONE]``) and non-streaming JSON. Each request takes the next queued reply; every request
body is recorded. Replies are built with :func:`text_turn`, :func:`tool_turn`, :func:`error` or
:func:`raw_stream` (chunks exactly as given, for malformed tool-call streams).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"id","name","arguments"(str|dict)}
    chunks: list[dict[str, Any]] | None = None  # raw delta list for streaming (overrides text/tool_calls)
    error_body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 11, "completion_tokens": 7})


def text_turn(text: str, **kw: Any) -> Reply:
    return Reply(text=text, **kw)


def tool_turn(calls: list[dict[str, Any]], text: str = "", **kw: Any) -> Reply:
    return Reply(text=text, tool_calls=calls, **kw)


def raw_stream(deltas: list[dict[str, Any]], **kw: Any) -> Reply:
    return Reply(chunks=deltas, **kw)


def error(status: int, message: str = "slow down", **kw: Any) -> Reply:
    body = {"error": {"message": message, "type": "rate_limit_error" if status == 429 else "server_error",
                      "code": status}}
    return Reply(status=status, error_body=body, **kw)


class LoopbackServer:
    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append({"path": self.path, "body": body,
                                            "auth": self.headers.get("Authorization", "")})
                    reply = server.replies.pop(0) if server.replies else error(500, "no reply queued")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": f"unknown path {self.path}"}})
                elif reply.status != 200:
                    self._json(reply.status, reply.error_body or {}, reply.headers)
                elif body.get("stream"):
                    self._sse(body, reply)
                else:
                    self._json(200, _completion(body, reply))

            def _json(self, status: int, obj: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, body: dict[str, Any], reply: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                for chunk in _stream_chunks(body, reply, include_usage):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *replies: Reply) -> None:
        with self.lock:
            self.replies.extend(replies)

    def __enter__(self) -> "LoopbackServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.get("id"), "type": "function",
             "function": {"name": c["name"],
                          "arguments": c["arguments"] if isinstance(c["arguments"], str)
                          else json.dumps(c["arguments"])}}
            for c in reply.tool_calls
        ]
    usage = dict(reply.usage, total_tokens=sum(reply.usage.values()))
    return {"id": "chatcmpl-loopback", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "test-model"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
            "usage": usage}


def _stream_chunks(body: dict[str, Any], reply: Reply, include_usage: bool) -> list[dict[str, Any]]:
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if reply.chunks is not None:
        deltas.extend(reply.chunks)
    else:
        for i in range(0, len(reply.text), 5):
            deltas.append({"content": reply.text[i : i + 5]})
        for index, call in enumerate(reply.tool_calls):
            args = call["arguments"] if isinstance(call["arguments"], str) else json.dumps(call["arguments"])
            deltas.append({"tool_calls": [{"index": index, "id": call.get("id"), "type": "function",
                                           "function": {"name": call["name"], "arguments": ""}}]})
            for i in range(0, len(args), 7):
                deltas.append({"tool_calls": [{"index": index, "function": {"arguments": args[i : i + 7]}}]})
    base = {"id": "chatcmpl-loopback", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": body.get("model", "test-model")}
    chunks = [dict(base, choices=[{"index": 0, "delta": d, "finish_reason": None}]) for d in deltas]
    finish = "tool_calls" if (reply.tool_calls or any("tool_calls" in d for d in deltas)) else "stop"
    chunks.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
    if include_usage:
        usage = dict(reply.usage, total_tokens=sum(reply.usage.values()))
        chunks.append(dict(base, choices=[], usage=usage))
    return chunks
