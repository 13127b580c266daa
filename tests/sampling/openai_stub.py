"""A local OpenAI-compatible server (standard library only) backed by a real transformers model:
/v1/chat/completions, and /v1/completions with token-id prompts as vLLM's server answers them."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class ChatServer:
    """Serves /v1/models, /v1/chat/completions and /v1/completions for the model in `model_dir` on
    127.0.0.1. `token_ids=False` answers completions with text only (a server without vLLM's
    `return_token_ids`); `completions=False` serves no /v1/completions at all (404)."""

    def __init__(self, model_dir: Path, served_name: str = "tiny", token_ids: bool = True,
                 completions: bool = True) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        configured = self.model.generation_config.eos_token_id
        # vLLM stops on the generation config's EOS ids and the tokenizer's
        self.eos_ids = sorted({*(configured if isinstance(configured, list) else [configured] if configured is not
                                 None else []), self.tokenizer.eos_token_id})
        self.served_name = served_name
        self.token_ids = token_ids
        self.requests: list[dict[str, Any]] = []  # chat completions
        self.completion_requests: list[dict[str, Any]] = []
        self.completion_answers: list[dict[str, Any]] = []  # in the order of completion_requests
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
                served = ["/v1/chat/completions"] + (["/v1/completions"] if completions else [])
                if self.path not in served:
                    self._send(404, {"error": "not found"})
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    if self.path == "/v1/completions":
                        answer = server.continue_ids(body)
                        server.completion_requests.append(body)
                        server.completion_answers.append(answer)
                    else:
                        server.requests.append(body)
                        answer = server.complete(body)
                    self._send(200, answer)

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

    def continue_ids(self, body: dict[str, Any]) -> dict[str, Any]:
        """A completion of a token-id prompt, n=1, as vLLM's server answers it: `token_ids` (EOS included
        when it stopped on one) when asked with `return_token_ids` and this server gives them, the text
        without special tokens, and `finish_reason` `stop` or `length`."""
        import torch

        prompt = [int(t) for t in body["prompt"]]
        assert int(body["n"]) == 1
        torch.manual_seed(int(body.get("seed", 0)))
        temperature = float(body["temperature"])
        decoding = {"do_sample": True, "temperature": temperature, "top_p": float(body.get("top_p", 1.0)),
                    "top_k": 0} if temperature > 0 else {"do_sample": False, "temperature": None, "top_p": None,
                                                          "top_k": None}
        with torch.no_grad():
            out = self.model.generate(input_ids=torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt),
                                      dtype=torch.long), **decoding, max_new_tokens=int(body["max_tokens"]),
                                      eos_token_id=self.eos_ids, pad_token_id=self.tokenizer.pad_token_id)
        ids = out[0, len(prompt):].tolist()
        end = next((i for i, t in enumerate(ids) if t in self.eos_ids), None)
        ids = ids if end is None else ids[:end + 1]
        choice: dict[str, Any] = {"index": 0, "text": self.tokenizer.decode(ids, skip_special_tokens=True),
                                  "finish_reason": "length" if end is None else "stop"}
        if body.get("return_token_ids") and self.token_ids:
            choice["token_ids"] = ids
        return {"id": "cmpl-test", "object": "text_completion", "model": self.served_name, "choices": [choice]}

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
