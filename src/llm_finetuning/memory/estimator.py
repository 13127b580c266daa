"""Peak GPU memory of a TRL 1.16 GRPO run, per GPU, before launch: pure arithmetic, no torch.

The model of a step (checked against bench/results/memory-h200.jsonl, measured on an H200):

- Resident through the run: the policy weights (in the load dtype: TRL 1.16 loads a model path in
  float32 unless a dtype is given), the reference model (full fine-tuning with beta > 0 only; LoRA's
  reference is the base with adapters switched off), and the AdamW state. transformers' default
  optimizer (fused torch AdamW) keeps m and v in each parameter's own dtype, so a bf16 model has a
  bf16 optimizer state and no fp32 master copy; LoRA adapters are fp32, so is their state.
- Training phase: resident + the peak of the backward pass. Activations are freed layer by layer as
  gradients are written, so the peak is at one end: all activations plus the LM head's gradient
  buffers (TRL's fused log-prob head accumulates the head gradient in fp32, then casts it), or all
  gradients at the optimizer step. TRL 1.16 never materialises batch x seq x vocab logits: its fused
  head projects in tiles of 4096 tokens x 32768 vocabulary entries.
- Generation phase: resident (gradients were freed by zero_grad) + the KV cache and prefill working
  set of the whole per-device generation batch (transformers) or the vLLM share (colocate).
- A float32 model trained under bf16 autocast keeps a bf16 copy of every matrix it multiplies while a
  forward pass runs (autocast's weight cache, and the copies saved for backward).
- The caching allocator reserves more than it hands out: reserved = allocated x ALLOCATOR_SLACK.
- The CUDA context is outside PyTorch's reserved memory; it counts for the fit verdict.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import NamedTuple, TypedDict

from llm_finetuning.memory.shapes import ModelShape

GIB = 1024**3
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
ADAPTERS = ("full", "lora", "qlora")
GENERATIONS = ("transformers", "vllm-colocate", "vllm-server")
DISTRIBUTED = ("single", "ddp", "zero2", "zero3", "fsdp2")

# --- Constants, each with its reason (tuned on bench/results/memory-h200.jsonl, none per point) ------
# Under bf16 autocast, matmuls and their saved activations are bf16 whatever the weights are.
ACTIVATION_BYTES = 2
# Activation bytes saved per token per decoder layer, in units of hidden (h), query width (q = heads x
# head_dim), key/value width (kv) and MLP width (i), for bf16 activations with SDPA attention. Counted
# from what autograd keeps in transformers' Llama/Qwen layers: each RMSNorm keeps an fp32 copy of its
# input and its bf16 output (6h, two norms: 12h); attention keeps q, k and v after RoPE, the copies RoPE
# itself saves, the SDPA output and o_proj's input (about 14q + 4kv with k and v repeated to q's width
# for grouped heads); the SwiGLU MLP keeps gate, up, silu(gate) and their product (8i).
ACT_PER_H = 12.0
ACT_PER_Q = 14.0
ACT_PER_KV = 4.0
ACT_PER_I = 8.0
ACT_QK_NORM = 6.0  # Qwen3/Gemma 3 normalise q and k per head: an fp32 and a bf16 copy of each
# With gradient checkpointing each layer keeps only its bf16 input (2h per token), and the backward
# pass recomputes one layer at a time, so one layer's full activations are alive at once.
CHECKPOINT_PER_H = 2.0
# The backward of one layer holds the gradients of its MLP intermediates (gate, up, their product and
# silu's input) in bf16 next to the saved activations: 8i bytes per token, checkpointed or not.
BACKWARD_WORKSPACE_PER_I = 8.0
# TRL's fused log-prob head scores only completion tokens, in bf16 tiles of up to 4096 tokens x 32768
# vocabulary entries, in forward and backward.
HEAD_TILE_TOKENS = 4096
HEAD_TILE_VOCAB = 32768
# Backward of the fused head: the weight gradient accumulates in fp32 (4 bytes), then is cast to the
# weight's dtype; both live at once. The hidden-state gradient is fp32 too (4h per token).
HEAD_GRAD_FP32 = 4
# Tied embeddings (full fine-tuning): at the end of backward the input embedding's gradient is built
# in fp32 and added to the LM head's gradient already held (measured: +1.3 GiB on Qwen2.5-1.5B, none
# on untied Qwen2.5-7B).
TIED_ACCUMULATE_FP32 = 4
# Prefill working set of transformers generate per prompt token: the MLP's gate, up and product (3i)
# and the attention inputs of one layer (4h), in the activation dtype; logits are kept for the last
# position only. The generation peak is the larger of (KV cache of the prompts + prefill working set)
# and (KV cache of prompts and completions) at the end. Measured on the generation phase of 20 runs:
# full fine-tuning 58-142 KB per prompt token against (3i + 4h) x 2 = 64-139 KB.
PREFILL_PER_I = 3.0
PREFILL_PER_H = 4.0
# PEFT's unmerged adapters add output-sized temporaries beside each base projection (the adapter
# output, its scaled copy, the sum): the LoRA prefill working set measured 1.86-1.93x the full one on
# six points (0.5-32 B).
LORA_PREFILL_FACTOR = 1.9
# The caching allocator's slack: peak reserved over peak allocated was 1.01-1.07 across the
# calibration points (median 1.04); blocks freed by generation or by the ref pass are reused but split.
ALLOCATOR_SLACK = 1.04
# Fixed extras inside reserved memory: cuBLAS workspaces, the token tensors, per-token log-probs and
# advantages, TRL's buffers (about 0.25 GiB measured beyond the model on the smallest points).
FIXED_GIB = 0.25
# Generation carries fewer of them (no backward workspaces, no advantages yet): refitted on the
# generation phases of all 23 calibration runs when the LoRA float32 points came in (max error 4.4%).
FIXED_GEN_GIB = 0.1
# The CUDA context and kernels loaded by torch/TRL/Triton, outside reserved memory (0.61 GiB on the
# H200 before any model); NCCL adds its own buffers when several GPUs train.
CUDA_CONTEXT_GIB = 0.75
NCCL_GIB = 0.6
# vLLM sleep mode (level 1) offloads weights and frees the KV cache during training; what stays
# (CUDA graphs, the sampler, allocator pools) is about a GiB.
VLLM_SLEEP_RESIDUAL_GIB = 1.0
# vLLM's own working memory beyond weights and KV blocks (activations, CUDA graphs, sampler).
VLLM_OVERHEAD_GIB = 2.0
# QLoRA: NF4 weights with double-quantised scales, about 0.52 bytes a parameter for the quantised
# linears; embeddings, norms and the LM head stay in the compute dtype.
NF4_BYTES = 0.516
# DeepSpeed ZeRO with bf16 keeps an fp32 master copy plus fp32 Adam m and v: 12 bytes a parameter,
# sharded over the GPUs; its reduce/prefetch buckets hold about this many parameters in bf16.
ZERO_OPTIMIZER_BYTES = 12
ZERO_BUCKET_PARAMS = 5e8


@dataclass(frozen=True)
class Settings:
    """Everything besides the model shape that decides a GRPO run's memory."""

    adapter: str = "full"
    dtype: str = "bfloat16"
    gpus: int = 1  # training GPUs (vllm-server GPUs excluded)
    gpu_memory_gib: float = 80.0  # per GPU; on CPU (`cpu`), the machine's RAM
    num_generations: int = 8
    per_device_batch: int = 8
    gradient_accumulation_steps: int = 4
    steps_per_generation: int | None = None  # TRL default: gradient_accumulation_steps
    max_completion_length: int = 512
    prompt_tokens: int = 512
    beta: float = 0.01
    generation: str = "vllm-colocate"
    gradient_checkpointing: bool = True
    distributed: str = "auto"  # auto: single on one GPU, else the cheapest of ddp/zero2/zero3 that fits
    lora_r: int = 16
    vllm_gpu_memory_utilization: float | None = None  # None: the estimate chooses
    vllm_enable_sleep_mode: bool | None = None  # None: the estimate chooses
    cpu: bool = False  # a CPU run (hardware.gpus 0): memory is RAM and there is no CUDA context
    episode_turns: int = 0  # a tool-use brief's episode.max_turns; 0: one completion per prompt

    def generation_context(self) -> int:
        """Tokens a generated sequence can hold in the cache: prompt and completion; in an episode TRL 1.16
        caps the whole episode (model turns and tool results) at max_completion_length, but generates each
        later turn with max_completion_length new tokens before cutting it, so the cache can hold one more."""
        return self.prompt_tokens + self.max_completion_length * (2 if self.episode_turns else 1)

    def episode_assumption(self) -> str | None:
        """What the estimate assumed about an episode's context, in one line (None without tools)."""
        if not self.episode_turns:
            return None
        m = self.max_completion_length
        return (f"episode of up to {self.episode_turns} tool rounds: prompt {self.prompt_tokens} + model turns and "
                f"tool results sharing max_completion_length {m} (TRL 1.16) in training, and {m} more for the "
                f"turn being generated ({self.generation_context()} tokens of cache a sequence)")

    def generation_batch(self) -> int:
        """Completions generated at once on one device (TRL: per-device batch x steps per generation)."""
        return self.per_device_batch * (self.steps_per_generation or self.gradient_accumulation_steps)


class Recommendation(TypedDict):
    """The estimate's advice that render writes into grpo_config.yaml: the vLLM memory share (None when vLLM does
    not share the GPU), whether vLLM sleeps while training, and the distribution the GPUs train with."""

    vllm_gpu_memory_utilization: float | None
    vllm_enable_sleep_mode: bool
    distributed: str


@dataclass
class Estimate:
    """A peak-memory estimate for one GPU; `total_gib` is PyTorch's predicted peak reserved memory."""

    model: str
    params: int
    settings: Settings
    total_gib: float
    fits: bool
    components: dict[str, float]
    gpu_memory_gib: float
    cuda_context_gib: float
    peak_phase: str
    phases: dict[str, float]
    recommend: Recommendation
    advice: list[str] = field(default_factory=list)
    vllm_server_gib: float | None = None

    @property
    def device_total_gib(self) -> float:
        """Peak reserved plus the CUDA context: what the GPU must hold (on CPU: the RAM)."""
        return self.total_gib + self.cuda_context_gib

    @property
    def device(self) -> str:
        """How messages name the memory the run must fit: `1 GPU(s) x 80 GiB`, or `CPU, 23 GiB RAM`."""
        if self.settings.cpu:
            return f"CPU, {self.gpu_memory_gib:g} GiB RAM"
        return f"{self.settings.gpus} GPU(s) x {self.gpu_memory_gib:g} GiB"

    @property
    def headroom_gib(self) -> float:
        return self.gpu_memory_gib - self.device_total_gib

    def to_json(self) -> dict[str, object]:
        return {
            "model": self.model,
            "params": self.params,
            "total_gib": round(self.total_gib, 2),
            "device_total_gib": round(self.device_total_gib, 2),
            "gpu_memory_gib": self.gpu_memory_gib,
            "fits": self.fits,
            "headroom_gib": round(self.headroom_gib, 2),
            "peak_phase": self.peak_phase,
            "components": {k: round(v, 3) for k, v in self.components.items()},
            "phases": {k: round(v, 2) for k, v in self.phases.items()},
            "cuda_context_gib": self.cuda_context_gib,
            "vllm_server_gib": None if self.vllm_server_gib is None else round(self.vllm_server_gib, 2),
            "settings": asdict(self.settings),
            "recommend": self.recommend,
            "advice": self.advice,
        }


def lora_params(shape: ModelShape, r: int) -> int:
    """Adapter parameters of LoRA rank r on every linear layer PEFT's all-linear targets."""
    return sum(r * (i + o) * n for i, o, n in shape.linear_shapes())


def activation_bytes_per_token_layer(shape: ModelShape, act_bytes: int) -> float:
    """Bytes autograd keeps per token per decoder layer without checkpointing."""
    q = shape.heads * shape.d_head
    kv = shape.kv_heads * shape.d_head
    per = ACT_PER_H * shape.hidden + ACT_PER_Q * q + ACT_PER_KV * kv
    if shape.family in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text"):
        per += ACT_QK_NORM * (q + kv)
    if shape.is_moe:
        # each token's top-k experts run their SwiGLU; the router keeps its logits in fp32
        per += ACT_PER_I * shape.intermediate * shape.experts_per_token + 4 * shape.experts
        per += ACT_PER_I * shape.shared_expert_intermediate
    else:
        per += ACT_PER_I * shape.intermediate
    return per * act_bytes / 2


def _gib(nbytes: float) -> float:
    return nbytes / GIB


@dataclass(frozen=True)
class StateBytes:
    """Bytes per parameter of what training keeps resident: the weights, and for each trained
    parameter its gradient and AdamW state (for LoRA/QLoRA, per adapter parameter; the base weights
    are frozen and carry neither)."""

    weights: float
    gradients: float
    optimizer: float


def state_bytes_per_parameter(adapter: str, dtype: str, distributed: str = "single") -> StateBytes:
    """What the estimator counts per parameter; references/lora-qlora.md's table is generated from it.

    Full fine-tuning with torch AdamW keeps m and v in each parameter's own dtype and no master copy
    (bf16: 2 + 2 + 4 bytes; a float32 load: 4 + 4 + 8); DeepSpeed ZeRO-2/3 keeps an fp32 master copy
    and fp32 moments instead (12 bytes of optimizer state, sharded). PEFT keeps adapters, their
    gradients and their moments in fp32 (4 + 8); QLoRA's quantised linears take NF4_BYTES.
    """
    wb = DTYPE_BYTES[dtype]
    if adapter == "full":
        optimizer = ZERO_OPTIMIZER_BYTES if distributed in ("zero2", "zero3") else 2 * wb
        return StateBytes(weights=wb, gradients=wb, optimizer=optimizer)
    return StateBytes(weights=NF4_BYTES if adapter == "qlora" else wb, gradients=4, optimizer=8)


def _resolve_distributed(s: Settings) -> str:
    if s.gpus <= 1:
        return "single"
    return "ddp" if s.distributed == "auto" else s.distributed


@dataclass(frozen=True)
class _Run:
    """One run's settings with the distributed strategy resolved: what every memory component reads."""

    shape: ModelShape
    settings: Settings
    distributed: str  # single, ddp, zero2, zero3 or fsdp2

    @property
    def shards(self) -> int:
        """GPUs that ZeRO-2/3 and FSDP2 split sharded state over; 1 for single and DDP."""
        return max(1, self.settings.gpus) if self.distributed in ("zero2", "zero3", "fsdp2") else 1

    @property
    def weight_bytes(self) -> int:
        """Bytes of one weight in the load dtype."""
        return DTYPE_BYTES[self.settings.dtype]

    @property
    def embedding_params(self) -> int:
        """Parameters of the input embedding; the LM head (tied or not) has the same shape."""
        return self.shape.vocab * self.shape.hidden

    @property
    def state_bytes(self) -> StateBytes:
        return state_bytes_per_parameter(self.settings.adapter, self.settings.dtype, self.distributed)

    @property
    def trains_all_weights(self) -> bool:
        return self.settings.adapter == "full"

    @property
    def has_reference_model(self) -> bool:
        """TRL loads a separate reference model for full fine-tuning with beta > 0 only; LoRA's
        reference is the base with the adapters switched off."""
        return self.settings.beta > 0 and self.trains_all_weights

    @property
    def micro_batch_tokens(self) -> int:
        """Prompt and completion tokens of one training micro-batch on one device."""
        s = self.settings
        return s.per_device_batch * (s.prompt_tokens + s.max_completion_length)


class _PhaseBytes(NamedTuple):
    """One component's bytes in each phase of a step."""

    train: float
    generation: float


def _policy_weight_bytes(run: _Run) -> float:
    """The policy's weights on one GPU, resident through the run.

    In the load dtype (TRL 1.16 loads a model path in float32 unless a dtype is given). QLoRA stores
    the quantised linears in NF4 (NF4_BYTES a parameter); embeddings, norms and the LM head stay in the
    compute dtype, and so do a MoE's experts: transformers 5 stores them as fused 3-D parameters, which
    bitsandbytes leaves unquantised. ZeRO-3 and FSDP2 shard the weights and gather one layer at a time,
    plus the next one prefetched.
    """
    shape, wb = run.shape, run.weight_bytes
    params = shape.params()
    if run.settings.adapter == "qlora":
        embedding_matrices = 1 if shape.tie_word_embeddings else 2
        quantised = params - run.embedding_params * embedding_matrices - shape.extra_params
        if shape.is_moe:
            quantised -= shape.layers * shape.experts * 3 * shape.hidden * shape.intermediate
        weights = quantised * NF4_BYTES + (params - quantised) * wb
    else:
        weights = params * wb
    if run.distributed in ("zero3", "fsdp2"):
        weights = weights / run.shards
        weights += 2 * shape.layer_params() * wb
    return weights


def _adapter_weight_bytes(run: _Run) -> int:
    """LoRA/QLoRA adapters on every linear layer; PEFT keeps adapters in fp32."""
    return lora_params(run.shape, run.settings.lora_r) * 4


def _reference_weight_bytes(run: _Run) -> float:
    """The frozen reference model of full fine-tuning with beta > 0: a second copy of the weights in
    the load dtype, sharded like the policy under ZeRO-3 and FSDP2."""
    sharded = run.distributed in ("zero3", "fsdp2")
    return run.shape.params() * run.weight_bytes / (run.shards if sharded else 1)


def _autocast_copy_bytes(run: _Run) -> _PhaseBytes:
    """bf16 copies of a float32 model's weights that bf16 autocast keeps alive (nothing for bf16/fp16).

    Autocast casts every matrix it multiplies: all weights but the input embedding (a tied embedding
    is also the LM head's matrix). generate runs inside one autocast region, so its cache holds a bf16
    copy of every matrix it casts (measured: 13.4 GiB on Qwen2.5-7B, 2.97 on 1.5B). The cache keeps
    only casts of weights that require grad: under LoRA the frozen base's casts are transient, the
    largest alive at once being the LM head's (measured 7B LoRA float32: 1.6 GiB above the weights
    while generating, where a full copy would be 13). Training saves the copies for backward, or with
    checkpointing one layer's and the head's.
    """
    shape, s = run.shape, run.settings
    if s.dtype != "float32":
        return _PhaseBytes(train=0.0, generation=0.0)
    head = run.embedding_params
    cast_params = shape.params() - (0 if shape.tie_word_embeddings else head) - shape.extra_params
    generation = cast_params * 2 if run.trains_all_weights else head * 2
    train = cast_params * 2 if not s.gradient_checkpointing else shape.layer_params() * 2 + head * 2
    return _PhaseBytes(train=train, generation=generation)


def _trained_params(run: _Run) -> int:
    """Parameters that carry a gradient and optimizer state: all of them, or LoRA's adapters."""
    return run.shape.params() if run.trains_all_weights else lora_params(run.shape, run.settings.lora_r)


def _optimizer_state_bytes(run: _Run) -> float:
    """AdamW's state of the trained parameters (bytes per parameter from state_bytes_per_parameter),
    sharded over the GPUs by ZeRO-2/3 and FSDP2 in full fine-tuning."""
    per_param = run.state_bytes.optimizer
    if run.trains_all_weights and run.distributed in ("zero2", "zero3", "fsdp2"):
        return _trained_params(run) * per_param / run.shards
    return _trained_params(run) * per_param


def _gradient_bytes(run: _Run) -> float:
    """All gradients at once, as the optimizer step sees them (the other end of the backward peak).

    ZeRO-2/3 shard them and add reduce buckets of ZERO_BUCKET_PARAMS bf16 parameters; FSDP2 shards
    them; DDP's flat reduction buckets copy every gradient. A tied embedding's gradient arrives twice:
    the second (input-side) contribution is computed as a new tensor plus an fp32 accumulation buffer
    beside all the other gradients (TIED_ACCUMULATE_FP32).
    """
    per_param = run.state_bytes.gradients
    trained = _trained_params(run)
    if not run.trains_all_weights:
        return trained * per_param * (2 if run.distributed == "ddp" else 1)
    if run.distributed in ("zero2", "zero3"):
        gradients = trained * per_param / run.shards + ZERO_BUCKET_PARAMS * 2
    elif run.distributed == "fsdp2":
        gradients = trained * per_param / run.shards
    else:
        gradients = trained * per_param
        if run.distributed == "ddp":
            gradients *= 2
    if run.shape.tie_word_embeddings:
        gradients += run.embedding_params * (per_param + TIED_ACCUMULATE_FP32) / run.shards
    return gradients


def _saved_activation_bytes(run: _Run) -> float:
    """What autograd has saved when backward starts: every layer's activations for the micro-batch
    (activation_bytes_per_token_layer), or with gradient checkpointing each layer's bf16 input only."""
    shape = run.shape
    if run.settings.gradient_checkpointing:
        return run.micro_batch_tokens * CHECKPOINT_PER_H * shape.hidden * shape.layers
    return run.micro_batch_tokens * activation_bytes_per_token_layer(shape, ACTIVATION_BYTES) * shape.layers


def _head_backward_bytes(run: _Run) -> float:
    """The fused log-prob head's backward: one bf16 tile of completion tokens x vocabulary, the fp32
    hidden-state gradient, and (full fine-tuning) the head's weight gradient in fp32 beside its cast to
    the weight's dtype."""
    shape = run.shape
    scored = run.settings.per_device_batch * run.settings.max_completion_length  # completion tokens
    tile = min(scored, HEAD_TILE_TOKENS) * min(shape.vocab, HEAD_TILE_VOCAB) * ACTIVATION_BYTES
    transient: float = tile + scored * shape.hidden * HEAD_GRAD_FP32
    if run.trains_all_weights:
        transient += run.embedding_params * (HEAD_GRAD_FP32 + run.state_bytes.gradients)
    return transient


def _layer_backward_bytes(run: _Run) -> float:
    """One decoder layer's backward: the gradients of its MLP intermediates (checkpointed or not), and
    under checkpointing its recomputed activations."""
    shape = run.shape
    experts = max(1, shape.experts_per_token)
    workspace = run.micro_batch_tokens * BACKWARD_WORKSPACE_PER_I * shape.intermediate * experts
    if run.settings.gradient_checkpointing:
        return run.micro_batch_tokens * activation_bytes_per_token_layer(shape, ACTIVATION_BYTES) + workspace
    return workspace


def _backward_working_set_bytes(run: _Run) -> float:
    """What backward holds on top of the saved activations at its peak.

    First comes the fused head's backward; once that is freed, one layer's backward beside the head
    gradient already written (full fine-tuning). Later the activations shrink as gradients grow, so
    the other end of the peak is all gradients at the optimizer step (_gradient_bytes).
    """
    head_gradient = run.embedding_params * run.state_bytes.gradients if run.trains_all_weights else 0
    return max(_head_backward_bytes(run), _layer_backward_bytes(run) + head_gradient)


def _kv_cache_bytes_per_token(run: _Run) -> int:
    """Keys and values of every layer for one token. They come out of bf16 matmuls under autocast, so
    a float32 model caches them in bf16."""
    shape = run.shape
    value_bytes = ACTIVATION_BYTES if run.settings.dtype == "float32" else run.weight_bytes
    return 2 * shape.layers * shape.kv_heads * shape.d_head * value_bytes


def _transformers_generation_bytes(run: _Run) -> float:
    """transformers generate for the whole per-device generation batch: the larger of (KV cache of the
    prompts + the prefill working set) and (KV cache of prompts and completions) at the end, plus the
    last-position logits and sampling probabilities in fp32.

    The prefill working set per prompt token is the MLP's gate, up and product (PREFILL_PER_I) and one
    layer's attention inputs (PREFILL_PER_H) in the activation dtype, LORA_PREFILL_FACTOR times that
    under PEFT's unmerged adapters.
    """
    shape, s = run.shape, run.settings
    batch = s.generation_batch()
    kv_per_token = _kv_cache_bytes_per_token(run)
    prefill = batch * s.prompt_tokens * (PREFILL_PER_I * shape.intermediate * max(1, shape.experts_per_token)
                                         + PREFILL_PER_H * shape.hidden) * ACTIVATION_BYTES
    if not run.trains_all_weights:
        prefill *= LORA_PREFILL_FACTOR
    at_prefill = batch * s.prompt_tokens * kv_per_token + prefill
    at_end = batch * s.generation_context() * kv_per_token
    return max(at_prefill, at_end) + batch * shape.vocab * 4 * 2


def _vllm_colocate_bytes(s: Settings) -> _PhaseBytes:
    """vLLM's share of the GPU in colocate mode (vllm_gpu_memory_utilization, 0.3 when unset): all of it
    while generating; while training the share stays unless sleep mode leaves only its residual."""
    share = (s.vllm_gpu_memory_utilization or 0.3) * s.gpu_memory_gib * GIB
    train = VLLM_SLEEP_RESIDUAL_GIB * GIB if s.vllm_enable_sleep_mode else share
    return _PhaseBytes(train=train, generation=share)


def _vllm_server_gib(run: _Run) -> float:
    """The separate vLLM server GPU's floor: bf16 weights and KV blocks for one device's generation
    batch (it serves the other devices' batches in turn; more KV memory only raises its throughput)."""
    return _gib(run.shape.params() * 2 + _vllm_kv_cache_bytes(run.shape, run.settings)) + VLLM_OVERHEAD_GIB


def _vllm_kv_cache_bytes(shape: ModelShape, s: Settings) -> int:
    """vLLM's bf16 KV blocks for one device's generation batch, prompts and completions at full length."""
    seq = s.generation_context()
    return s.generation_batch() * seq * 2 * shape.layers * shape.kv_heads * shape.d_head * 2


def _resident_components(run: _Run) -> tuple[float, dict[str, float]]:
    """What stays on the GPU through every phase, in bytes, and the same named in GiB: the policy
    weights, the adapters or the reference model, and the optimizer state."""
    weights = _policy_weight_bytes(run)
    adapter = 0 if run.trains_all_weights else _adapter_weight_bytes(run)
    reference = _reference_weight_bytes(run) if run.has_reference_model else 0.0
    optimizer = _optimizer_state_bytes(run)
    components = {"policy_weights": _gib(weights)}
    if not run.trains_all_weights:
        components["adapter_weights"] = _gib(adapter)
    if run.has_reference_model:
        components["reference_weights"] = _gib(reference)
    components["optimizer_state"] = _gib(optimizer)
    return weights + reference + adapter + optimizer, components


class _Step(NamedTuple):
    """What each phase of a step adds on top of the resident state, in bytes."""

    autocast: _PhaseBytes
    activations: float
    backward_working_set: float
    gradients: float
    transformers_generation: float  # 0 unless transformers generates
    vllm: _PhaseBytes  # 0 unless vLLM is colocated

    @property
    def backward_peak(self) -> float:
        return self.activations + self.backward_working_set

    @property
    def training(self) -> float:
        """The training phase's peak beyond the resident state: the larger end of backward."""
        return max(self.backward_peak, self.gradients)


def _step(run: _Run) -> _Step:
    """Every component a phase adds, for the generation backend the settings choose (a vLLM server
    GPU adds nothing to the training GPUs)."""
    s = run.settings
    generation = _transformers_generation_bytes(run) if s.generation == "transformers" else 0.0
    vllm = _vllm_colocate_bytes(s) if s.generation == "vllm-colocate" else _PhaseBytes(train=0.0, generation=0.0)
    return _Step(_autocast_copy_bytes(run), _saved_activation_bytes(run), _backward_working_set_bytes(run),
                 _gradient_bytes(run), generation, vllm)


def _peak_phase_components(run: _Run, step: _Step, peak_phase: str) -> dict[str, float]:
    """The named parts of the peak phase beyond the resident state, in GiB; the fixed buffers last."""
    components: dict[str, float] = {}
    autocast = step.autocast.train if peak_phase == "train" else step.autocast.generation
    if autocast:
        components["autocast_weight_copies"] = _gib(autocast)
    if peak_phase == "train":
        if step.backward_peak >= step.gradients:
            components["activations"] = _gib(step.activations)
            components["backward_working_set"] = _gib(step.backward_working_set)
        else:
            components["gradients"] = _gib(step.gradients)
        if step.vllm.train:
            components["vllm_sleeping" if run.settings.vllm_enable_sleep_mode else "vllm"] = _gib(step.vllm.train)
    else:
        if run.settings.generation == "transformers":
            components["generation_kv_cache"] = _gib(step.transformers_generation)
        if step.vllm.generation:
            components["vllm"] = _gib(step.vllm.generation)
    components["fixed_buffers"] = FIXED_GIB if peak_phase == "train" else FIXED_GEN_GIB
    return components


def _core(shape: ModelShape, s: Settings) -> Estimate:
    """The estimate for fully specified settings (distributed resolved, vLLM share chosen): each phase's
    peak reserved memory, and the components of the higher one plus the allocator's slack."""
    run = _Run(shape, s, _resolve_distributed(s))
    resident, components = _resident_components(run)
    step = _step(run)
    train = resident + step.autocast.train + step.training + FIXED_GIB * GIB
    generation = resident + step.autocast.generation + step.transformers_generation + FIXED_GEN_GIB * GIB
    train_reserved = train * ALLOCATOR_SLACK + step.vllm.train
    generation_reserved = generation * ALLOCATOR_SLACK + step.vllm.generation
    phases = {"train": _gib(train_reserved), "generation": _gib(generation_reserved)}
    peak_phase = "train" if train_reserved >= generation_reserved else "generation"

    components.update(_peak_phase_components(run, step, peak_phase))
    allocated = sum(v for k, v in components.items() if not k.startswith("vllm"))
    components["allocator_slack"] = allocated * (ALLOCATOR_SLACK - 1)
    total = sum(components.values())
    context = 0.0 if s.cpu else CUDA_CONTEXT_GIB + (NCCL_GIB if s.gpus > 1 else 0.0)
    colocated = s.generation == "vllm-colocate"
    util = s.vllm_gpu_memory_utilization
    recommend: Recommendation = {
        "vllm_gpu_memory_utilization": round(util, 2) if colocated and util else None,
        "vllm_enable_sleep_mode": bool(s.vllm_enable_sleep_mode) if colocated else False,
        "distributed": run.distributed,
    }
    vllm_server = _vllm_server_gib(run) if s.generation not in ("transformers", "vllm-colocate") else None
    return Estimate(shape.name, shape.params(), replace(s, distributed=run.distributed), total,
                    total + context <= s.gpu_memory_gib, components, s.gpu_memory_gib, context,
                    peak_phase, phases, recommend, vllm_server_gib=vllm_server)


def _vllm_needed_gib(shape: ModelShape, s: Settings) -> float:
    """What vLLM needs in colocate mode: bf16 weights, KV blocks for the generation batch, overhead."""
    return _gib(shape.params() * 2 + _vllm_kv_cache_bytes(shape, s) * 1.2) + VLLM_OVERHEAD_GIB


def estimate(shape: ModelShape, settings: Settings) -> Estimate:
    """Estimate a run; where settings leave a choice (vLLM share and sleep, distributed), choose the
    cheapest that fits, then compute the advice (cheapest change first) when it does not fit."""
    s = settings
    if s.generation == "vllm-colocate":
        if s.vllm_gpu_memory_utilization is None:
            util = math.ceil(_vllm_needed_gib(shape, s) / s.gpu_memory_gib * 20) / 20
            s = replace(s, vllm_gpu_memory_utilization=min(0.9, max(0.1, util)))
        if s.vllm_enable_sleep_mode is None:
            awake = _core(shape, replace(s, vllm_enable_sleep_mode=False))
            s = replace(s, vllm_enable_sleep_mode=not awake.fits)
    if s.distributed == "auto" and s.gpus > 1:
        for dist in ("ddp", "zero2", "zero3"):
            candidate = _core(shape, replace(s, distributed=dist))
            if candidate.fits:
                break
        s = replace(s, distributed=dist)
    result = _core(shape, s)
    if not result.fits:
        result.advice = advise(shape, s)
    return result


def _changes(shape: ModelShape, s: Settings) -> list[tuple[str, Settings]]:
    """Candidate changes, cheapest (least change to what is trained, and how fast) first."""
    out: list[tuple[str, Settings]] = []
    if s.generation == "vllm-colocate" and not s.vllm_enable_sleep_mode:
        out.append(("turn on vLLM sleep mode (vllm_enable_sleep_mode: true)",
                    replace(s, vllm_enable_sleep_mode=True)))
    if s.dtype == "float32":
        out.append(("load the model in bfloat16 (model.dtype: bfloat16, --dtype bfloat16)",
                    replace(s, dtype="bfloat16")))
    if not s.gradient_checkpointing:
        out.append(("turn on gradient checkpointing (grpo.gradient_checkpointing: true)",
                    replace(s, gradient_checkpointing=True)))
    b, ga = s.per_device_batch, s.gradient_accumulation_steps
    while b > 1 and b % 2 == 0:
        b, ga = b // 2, ga * 2
        spg = s.steps_per_generation or s.gradient_accumulation_steps
        out.append((f"halve the micro-batch, same effective batch (per_device_train_batch_size: {b}, "
                    f"gradient_accumulation_steps: {ga})",
                    replace(s, per_device_batch=b, gradient_accumulation_steps=ga,
                            steps_per_generation=spg * s.per_device_batch // b)))
    if s.gpus > 1:
        for dist in ("zero2", "zero3"):
            if DISTRIBUTED.index(dist) > DISTRIBUTED.index(_resolve_distributed(s)):
                out.append((f"shard with DeepSpeed {dist.upper()} over the {s.gpus} GPUs",
                            replace(s, distributed=dist)))
    if s.generation == "vllm-colocate":
        out.append(("generate on a separate vLLM server GPU (hardware.generation: vllm-server, one more GPU)",
                    replace(s, generation="vllm-server", vllm_gpu_memory_utilization=None,
                            vllm_enable_sleep_mode=None)))
    if s.adapter == "full":
        out.append(("train LoRA adapters instead of all weights (model.adapter: lora)",
                    replace(s, adapter="lora")))
    if s.generation == "vllm-colocate":
        out.append(("generate with transformers instead of vLLM, slower (hardware.generation: transformers)",
                    replace(s, generation="transformers", vllm_gpu_memory_utilization=None,
                            vllm_enable_sleep_mode=None)))
    if s.beta > 0 and s.adapter == "full":
        out.append(("drop the reference model (grpo.beta: 0)", replace(s, beta=0.0)))
    if s.generation_batch() > s.num_generations:
        spg = max(1, s.num_generations // s.per_device_batch)
        out.append((f"generate fewer completions per device at once (steps_per_generation: {spg})",
                    replace(s, steps_per_generation=spg)))
    for gpus in (2, 4, 8):
        if gpus > s.gpus:
            out.append((f"train on {gpus} GPUs with DeepSpeed ZeRO-3 (hardware.gpus: {gpus})",
                        replace(s, gpus=gpus, distributed="zero3")))
    if s.max_completion_length > 256:
        half = s.max_completion_length // 2
        out.append((f"shorter completions (grpo.max_completion_length: {half})",
                    replace(s, max_completion_length=half)))
    if s.adapter != "qlora":
        out.append(("train QLoRA adapters on a 4-bit base (model.adapter: qlora)", replace(s, adapter="qlora")))
    return out


def advise(shape: ModelShape, s: Settings, limit: int = 3) -> list[str]:
    """The cheapest changes that make the run fit, each checked by re-running the estimator."""
    out: list[str] = []
    for text, changed in _changes(shape, s):
        if changed.generation == "vllm-colocate" and changed.vllm_enable_sleep_mode is None:
            changed = replace(changed, vllm_enable_sleep_mode=True)
        if changed.generation == "vllm-colocate" and changed.vllm_gpu_memory_utilization is None:
            changed = replace(changed, vllm_gpu_memory_utilization=s.vllm_gpu_memory_utilization)
        est = _core(shape, changed)
        if est.fits:
            out.append(f"{text}: {est.device_total_gib:.1f} GiB of {s.gpu_memory_gib:g} GiB")
            if len(out) >= limit:
                break
    if not out:
        out.append("no single change fits: combine LoRA or QLoRA with more GPUs, or choose a smaller model")
    return out
