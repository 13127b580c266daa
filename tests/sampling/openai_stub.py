"""A local OpenAI-compatible chat server (standard library only) backed by a real transformers model."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class ChatServer:
    """Serves /v1/models and /v1/chat/completions for the model in `model_dir` on 127.0.0.1."""

    def __init__(self, model_dir: Path, served_name: str = "tiny") -> None:
        import torch
        from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

        self.tokenizer = PreTrainedTokenizerFast.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.served_name = served_name
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.served_name, "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:  # noqa: N802
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": "not found"})
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append(body)
                    self._send(200, server.complete(body))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        import torch

        tok = self.tokenizer
        text = tok.apply_chat_template(body["messages"], add_generation_prompt=True, tokenize=False)
        enc = tok(text, return_tensors="pt", add_special_tokens=False)
        torch.manual_seed(int(body.get("seed", 0)))
        with torch.no_grad():
            temperature = float(body["temperature"])  # 0: greedy, as vLLM's server reads it
            decoding = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
            out = self.model.generate(**enc, **decoding, top_k=0,
                                      max_new_tokens=int(body["max_tokens"]), num_return_sequences=int(body["n"]),
                                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
        choices = []
        for i, ids in enumerate(out[:, enc["input_ids"].shape[1]:].tolist()):
            end = ids.index(tok.eos_token_id) if tok.eos_token_id in ids else None
            kept = ids if end is None else ids[:end]
            choices.append({"index": i, "message": {"role": "assistant", "content": tok.decode(kept)},
                            "finish_reason": "length" if end is None else "stop"})
        return {"id": "chatcmpl-test", "object": "chat.completion", "model": self.served_name, "choices": choices}

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
