"""Sample a brief's model on a brief's prompts and score every completion with the brief's rewards.

The one path shared by `finetune baseline` and `finetune inspect`: resolve the model (dequantising a
GGUF once), build the chat messages with `data.system_prompt`, generate k completions per prompt at
`grpo.temperature` (or an evaluation setting: another temperature, or greedy) and
`grpo.max_completion_length` on the chosen backend with a progress bar on
stderr, then score each completion with `llm_finetuning.rewards.score_rows`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypedDict

from llm_finetuning.brief import Brief
from llm_finetuning.brief.columns import require_columns
from llm_finetuning.brief.episode import EpisodeSpec
from llm_finetuning.errors import UnusableInput
from llm_finetuning.jsonvalue import JsonValue
from llm_finetuning.sampling.backend import Backend, ChatMessage, Completion, SamplingSettings
from llm_finetuning.sampling.data import DataSplit, Row, build_messages, load_split, pick_indices
from llm_finetuning.sampling.factory import choose_backend, cuda_available, make_backend, vllm_installed
from llm_finetuning.sampling.progress import SamplingProgress

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from llm_finetuning.records.baseline import Decoding
    from llm_finetuning.rewards.code import VerifiedCode


class _Score(TypedDict):
    rewards: dict[str, float | None]
    total: float | None


class Score(_Score, total=False):
    """One completion's scores: every reward's value (None: the reward abstained), their weighted total, and each
    reward's explanation when scored with explain."""

    explanations: dict[str, str | None]


@dataclass
class SampledPrompt:
    """One prompt of the split with its k completions and, once scored, each completion's rewards."""

    row_index: int
    row: Row
    messages: list[ChatMessage]
    completions: list[Completion]
    scores: list[Score] = field(default_factory=list)


@dataclass
class SamplingRun:
    split: DataSplit
    prompts: list[SampledPrompt]
    settings: SamplingSettings
    model_identity: str
    backend: dict[str, JsonValue]
    seconds: float
    tokenizer: PreTrainedTokenizerBase | None = None


def settings_from_brief(brief: Brief, k: int, seed_offset: int = 0,
                        max_completion_length: int | None = None, decoding: Decoding | None = None) -> SamplingSettings:
    """The brief's sampling settings (`records.baseline.brief_sampling_settings`) for k samples a prompt.

    `decoding` (a `records.baseline.Decoding`) replaces `grpo.temperature` with an evaluation setting.
    """
    from llm_finetuning.records.baseline import brief_sampling_settings

    now = brief_sampling_settings(brief)
    return SamplingSettings(
        k=k,
        temperature=decoding.temperature if decoding is not None else now["temperature"],
        greedy=bool(decoding is not None and decoding.greedy),
        max_completion_length=int(max_completion_length or now["max_completion_length"]),
        max_prompt_length=brief.grpo.max_prompt_length,
        seed=int(brief.grpo.seed) + seed_offset,
        top_p=now["top_p"],
        chat_template_kwargs=dict(brief.data.chat_template_kwargs),
    )


def recorded_settings(run: SamplingRun, system_prompt: str | None) -> dict[str, object]:
    """What a record keeps about how `run` sampled: the settings its figures depend on, and the backend."""
    from llm_finetuning.sampling.chat import TemplateIdentity, chat_template_identity

    template: TemplateIdentity
    if run.tokenizer is not None:
        template = chat_template_identity(run.tokenizer)
    else:  # an endpoint's chat completions apply the served model's template, which this side cannot see
        template = {"applied": "by the endpoint", "sha256": None}
    s = run.settings
    return {"temperature": s.temperature, "greedy": s.greedy, "max_completion_length": s.max_completion_length, "top_p": s.top_p,
            "max_prompt_length": s.max_prompt_length, "system_prompt": system_prompt or None,
            "chat_template": template, "seed": s.seed, "seconds": round(run.seconds, 1), **run.backend}


def sample_brief(brief: Brief, *, n_prompts: int, k: int, split: str = "auto", backend: str = "auto",
                 endpoint: str | None = None, endpoint_model: str | None = None, seed_offset: int = 0,
                 desc: str = "Sampling", indices: list[int] | None = None,
                 settings: SamplingSettings | None = None, system_prompt: str | None = None) -> SamplingRun:
    """k completions for each of `n_prompts` prompts of the split (spread over it, seeded).

    `indices` (rows of the split), `settings` and `system_prompt` ("" for none; None: the brief's) replace
    what the brief would choose: `finetune eval` samples the trained model on the baseline's prompts with the baseline's settings.
    """
    from llm_finetuning.models import model_identity, require_reachable, resolve_model

    if not endpoint:  # before torch is imported: a hub model neither cached nor reachable stops here
        require_reachable(brief.model, brief.folder)
    chosen = choose_backend(backend, endpoint, vllm_installed(), cuda_available() if not endpoint else False)
    data_split = load_split(brief, split)
    require_columns(brief.data, brief.rewards, data_split.rows, f"{data_split.yaml_path} ({data_split.source})")
    settings = settings or settings_from_brief(brief, k, seed_offset)
    model = brief.model
    if system_prompt is None:
        system_prompt = brief.data.system_prompt
    if indices is None:
        indices = pick_indices(len(data_split.rows), n_prompts, settings.seed)
    prompts = prompts_at(brief, data_split, indices, system_prompt)
    if chosen == "endpoint":  # an episode needs the brief's tokenizer here: the server sees token ids only
        resolved = resolve_model(model, brief.folder) if brief.episode is not None else None
        identity = resolved.identity if resolved is not None else model_identity(model, brief.folder)
        engine = make_backend(chosen, resolved, model.dtype, endpoint, endpoint_model)
    else:
        resolved = resolve_model(model, brief.folder)
        identity = resolved.identity
        engine = make_backend(chosen, resolved, model.dtype)
    started = time.monotonic()
    tokenizer = engine.tokenizer

    def first_call(head: list[SampledPrompt], groups: list[list[Completion]]) -> None:
        probe_rewards(brief, head, groups, data_split.source, tokenizer)

    with SamplingProgress(len(prompts), k, desc=desc) as bar:
        groups = generate_groups(engine, brief, prompts, settings, bar, first_call)
    seconds = time.monotonic() - started
    for p, group in zip(prompts, groups, strict=True):
        p.completions = group
    return SamplingRun(data_split, prompts, settings, identity, engine.describe(), seconds, engine.tokenizer)


FirstChunk = Callable[[list[SampledPrompt], list[list[Completion]]], None]


def generate_groups(engine: Backend, brief: Brief, prompts: list[SampledPrompt], settings: SamplingSettings,
                    bar: SamplingProgress, first_chunk: FirstChunk | None = None,
                    code: VerifiedCode | None = None) -> list[list[Completion]]:
    """k completions a prompt, or k episodes for a tool-use brief: what every sampler of a brief calls.

    `first_chunk(prompts, groups)` is called once the first batch is sampled, before the rest is (the rewards'
    first call). The first batch is sampled as a call of its own, with the seed the whole call would have given
    it and the rest's seed moved on by as many prompts, so every completion is the one a single call samples.
    `code`: a run's verified tool bytes (`rewards.code.VerifiedCode`), for episodes sampled while it trains."""
    spec = brief.episode
    if spec is not None:
        return sample_episodes(engine, brief, spec, prompts, settings, bar, first_chunk, code)
    conversations = [p.messages for p in prompts]
    if first_chunk is None:
        return list(engine.generate(conversations, settings, bar))
    n = _prompts_per_batch(engine, settings)
    head = list(engine.generate(conversations[:n], settings, bar))
    first_chunk(prompts[:n], head)
    if len(prompts) <= n:
        return head
    tail = engine.generate(conversations[n:], replace(settings, seed=settings.seed + n), bar)
    return head + [[replace(c, prompt_index=c.prompt_index + n) for c in group] for group in tail]


def _prompts_per_batch(engine: Backend, settings: SamplingSettings) -> int:
    """How many prompts a backend samples in one batch (transformers' batches of `batch_sequences`)."""
    return max(1, int(getattr(engine, "batch_sequences", 32)) // settings.k)


def probe_rewards(brief: Brief, head: list[SampledPrompt], groups: list[list[Completion]], source: str,
                  tokenizer: PreTrainedTokenizerBase | None) -> None:
    """The rewards' first call, on the first prompt's completions as soon as they are sampled: a reward that
    raises ends the verb here (`rewards.build.RewardFailed`, exit 2) rather than after every prompt is sampled.
    The values are thrown away; `score_run` scores every completion later."""
    from llm_finetuning.rewards import score_rows

    first = SampledPrompt(head[0].row_index, head[0].row, head[0].messages, groups[0])
    rows, describe = _score_rows_of(brief, [first], source)
    score_rows(brief, rows, describe=describe, tokenizer=tokenizer)


def sample_episodes(engine: Backend, brief: Brief, spec: EpisodeSpec, prompts: list[SampledPrompt],
                    settings: SamplingSettings, bar: SamplingProgress,
                    first_chunk: FirstChunk | None = None, code: VerifiedCode | None = None) -> list[list[Completion]]:
    """k episodes a prompt through `sampling.episode.run_episodes`, as Completions that carry them."""
    from llm_finetuning.sampling.episode import load_toolbox, prepare_tokenizer, run_episodes

    tokenizer = engine.tokenizer
    if not callable(getattr(engine, "generate_ids", None)) or tokenizer is None:
        raise UnusableInput(f"the {engine.name} backend cannot continue an episode from token ids (it has no "
                            "generate_ids, or no tokenizer to render and parse turns)",
                            "sample episodes with `--backend transformers`, `--backend vllm` or `--endpoint URL` "
                            "(docs/sampling.md, Episodes)", "episode")
    prepare_tokenizer(tokenizer, spec, brief.folder)
    toolbox = load_toolbox(spec, brief.folder, code)
    turn = [0]

    def generate(batch: list[list[int]], max_new: int) -> list[tuple[list[int], bool]]:
        turn[0] += 1
        return list(engine.generate_ids(batch, max_new, settings, settings.seed + 100_003 * turn[0]))

    groups: list[list[Completion]] = []
    per_chunk = _prompts_per_batch(engine, settings)  # the bar moves per chunk
    for start in range(0, len(prompts), per_chunk):
        chunk = prompts[start:start + per_chunk]
        episodes = run_episodes(tokenizer, generate, [p.messages for p in chunk], [p.row for p in chunk],
                                toolbox, k=settings.k, max_turns=spec.max_turns,
                                max_completion_length=settings.max_completion_length,
                                chat_template_kwargs=settings.chat_template_kwargs)
        groups += [[Completion(start + i, j, e.final_answer, e.truncated, e.model_tokens, e.to_json())
                    for j, e in enumerate(group)] for i, group in enumerate(episodes)]
        bar.advance(len(chunk), len(chunk) * settings.k)
        if start == 0 and first_chunk is not None:
            first_chunk(chunk, groups)
    hung = toolbox.hung.warning() if toolbox.hung is not None else None
    if hung:
        bar.note(hung)
    return groups


def prompts_at(brief: Brief, data_split: DataSplit, indices: list[int], system_prompt: str | None) -> list[SampledPrompt]:
    """The split's rows at `indices` as prompts to sample, with their chat messages."""
    if any(not 0 <= i < len(data_split.rows) for i in indices):
        raise UnusableInput(f"{data_split.yaml_path} ({data_split.source}) has {len(data_split.rows)} rows; the "
                            f"prompts to sample name rows up to {max(indices)}",
                            "run `finetune baseline BRIEF` again on the current data", data_split.yaml_path)
    field_name = brief.data.prompt_field
    return [SampledPrompt(i, data_split.rows[i], build_messages(data_split.rows[i][field_name], system_prompt), [])
            for i in indices]


def score_run(brief: Brief, run: SamplingRun, explain: bool = False, code: VerifiedCode | None = None) -> None:
    """Score every completion of `run` in place with every reward of the brief (bar on stderr).

    `explain`: each score also keeps every reward's explanation (`rewards.explain`), for a person to read.
    `code`: a run's verified reward bytes (`rewards.code.VerifiedCode`), for scoring while it trains.
    """
    from tqdm import tqdm

    from llm_finetuning.rewards import score_rows

    rows, describe = _score_rows_of(brief, run.prompts, run.split.source)
    with tqdm(total=len(rows), desc="Scoring", unit="completion", file=sys.stderr, dynamic_ncols=True,
              mininterval=0.5) as bar:
        scored = score_rows(brief, rows, progress=bar.update, explain=explain, describe=describe,
                            tokenizer=run.tokenizer, code=code)
    it = iter(scored)
    for p in run.prompts:
        p.scores = [_with_environment_reward(_score(s), c) for c, s in zip(p.completions, it, strict=False)]


def _score(scored: Mapping[str, object]) -> Score:
    """A row `score_rows` scored, as a Score."""
    from llm_finetuning.sampling.select import sample_number, sample_rewards

    score: Score = {"rewards": sample_rewards(scored), "total": sample_number(scored["total"])}
    explanations = scored.get("explanations")
    if isinstance(explanations, Mapping):
        score["explanations"] = {str(k): v if v is None or isinstance(v, str) else str(v)
                                 for k, v in explanations.items()}
    return score


def _score_rows_of(brief: Brief, prompts: list[SampledPrompt],
                   source: str) -> tuple[list[Row], Callable[[int], str]]:
    """The rows `score_rows` takes for every completion of `prompts` (the data row, its prompt, the completion),
    and what row i is in words: "completion j of data row R (SOURCE)"."""
    field_name = brief.data.prompt_field
    rows, where = [], []
    for p in prompts:
        for j, c in enumerate(p.completions):
            row = dict(p.row)
            row["prompt"] = p.row[field_name]
            row["completion"] = c.episode["messages"] if c.episode else c.text
            rows.append(row)
            where.append(f"completion {j} of data row {p.row_index} ({source})")
    return rows, where.__getitem__


def _with_environment_reward(score: Score, completion: Completion) -> Score:
    """An episode's environment reward (`get_reward()`) added as TRL adds it: named after the class, weight 1."""
    env = completion.episode.get("environment") if completion.episode is not None else None
    if not env:
        return score
    value = env.get("reward")
    score["rewards"][env["name"]] = value
    if value is not None:
        score["total"] = (score.get("total") or 0.0) + float(value)
    if "explanations" in score:
        score["explanations"][env["name"]] = f"{env['name']}.get_reward() returned {value!r}"
    return score
