"""`python -m llm_finetuning.sampling.episode_probe BRIEF`: what `finetune check` cannot see without imports.

Run in a child process by `finetune check` for a brief with an `episode` section, so the check itself
never imports torch, transformers or the brief's tools. Prints one JSON list of Problems on stdout:
every tool or environment that does not import or yields no JSON schema, and a chat template that
cannot render a tool-calling conversation or has no response parser. A model whose tokenizer cannot be
loaded here (not downloaded yet) gives a warning: the template is checked again before sampling.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from llm_finetuning.errors import Problem, Severity, UnusableInput


def probe(brief_path: Path) -> list[Problem]:
    from llm_finetuning.brief import load_brief
    from llm_finetuning.models import load_tokenizer, resolve_model
    from llm_finetuning.sampling.episode import template_problems, tool_schema_problems

    brief, errors = load_brief(brief_path)
    if errors or brief is None:
        return errors
    spec = brief.episode
    if spec is None:
        return []
    problems = tool_schema_problems(spec, brief.folder)
    try:
        tokenizer = load_tokenizer(resolve_model(brief.model, brief.folder))
    except UnusableInput as exc:
        return problems + [Problem("chat_template_unchecked", "episode.chat_template",
                                   f"the model's tokenizer could not be loaded to check its chat template: "
                                   f"{exc.message}", exc.fix or "load the model once, then check again", Severity.WARNING)]
    return problems + template_problems(tokenizer, spec, brief.folder)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    print(json.dumps([p.to_json() for p in probe(Path(args[0]))]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
