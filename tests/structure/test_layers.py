"""The package's layers, enforced from its import graph (read from the source with `ast`; nothing is imported).

Four rules: no import runs up the layers of docs/development.md ("Layers, checked in CI"); no modules, and no
subpackages counted whole, import each other in a cycle; the core imports no ML library at module level (so
`finetune check/gate/render/memory` answer in well under a second); and no package imports another package's
private names.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import llm_finetuning

PACKAGE = Path(llm_finetuning.__file__).resolve().parent
ROOT = "llm_finetuning"

# Imported by every layer: the error values, the file helpers, the one cache (`cache`: its root and keyed files),
# the places of keys and project settings (`locations`), what the plugin's guard shares with the package
# (`integrity`), the JSON value types (`jsonvalue`) and the package's `__version__`.
FOUNDATION = {"errors", "fileio", "cache", "locations", "integrity", "jsonvalue", ROOT}
FOUNDATION_MODULES = ("errors", "fileio", "cache", "locations", "integrity", "jsonvalue")

# What each layer may import besides itself and FOUNDATION. A target is a module path below the package and
# covers everything under it ("rewards.sources" allows that module only, "brief" the whole package).
# Edges in docs/development.md's list carry no comment; every other edge says why it is needed.
LAYERS: dict[str, set[str]] = {
    "cli": {"commands"},
    "commands": {
        "gate", "render", "launch", "sampling", "diagnose", "memory", "evaluation", "export",
        "brief",  # a verb loads the brief once and passes it down
        "records",  # baseline/inspect/review write and read the records they are named after
        "rewards", "reward_registry",  # score and calibrate-judge run the brief's rewards
        "models",  # resolving a model id or folder for the verbs that sample
        "rundir",  # `finetune diagnose` writes the run's diagnosis.json
        "demo",  # `finetune demo` is a verb like the others
        "broker",  # `finetune broker` serves it; `finetune protect` pins the broker's exact command
    },
    # runs each verb as a child process; it reads a brief as data (YAML and the schema's defaults) to keep the
    # files a verb would write or read inside the project
    "broker": {"brief"},
    "demo": {"rundir"},  # drives the real CLI in subprocesses: it imports no stage, and reads the run's eval.json
    "gate": {
        "brief", "records", "memory", "reward_registry",
        "models",  # model_identity: the records must name the brief's model and revision
        "rundir",  # a grpo.deviation run's diagnosis and manifest
    },
    "render": {
        "brief",  # the typed brief, whose RewardSpec names the metric keys (`fn`, `fn#2`) render and trainer agree on
        "rundir",  # the manifest it writes, and the one a render into the same RUN_DIR replaces
    },
    # The brief validates `rewards[*].args` against the registry's schemas; the registry imports nothing back.
    "brief": {
        "reward_registry",
        "models",  # the embedded model ids `model.id` may name (models imports nothing of the package)
    },
    "reward_registry": set(),
    "records": {
        "brief",  # the loaded Brief its functions take: a record binds the brief's rewards, data and model
        "reward_registry",  # the judge's argument defaults, bound by its calibration record
        "rewards.sources",  # the inspection binds every reward's source code
        "rewards.explain",  # a sample's one-line explanation shown at review
        "rundir",  # diagnosis.json's name in a run directory
    },
    "memory": {
        "brief",  # estimate_brief reads the brief's model, batch and hardware
        "models",  # config.json and GGUF headers of a local model
    },
    "rewards": {
        "reward_registry",  # the implementations take their names and argument defaults from the registry
        "brief",  # the loaded Brief that build_reward_funcs and score_rows take; brief.docgen's schema helpers
                  # generate the reward page as they do the brief page
        "models",  # length_penalty counts tokens with the policy's tokenizer
        "sandbox",  # unit_tests runs untrusted code only inside the sandbox
    },
    "sandbox": set(),
    "sampling": {
        "sampling", "rewards", "records",
        "reward_registry",  # which rewards are verifiers, for the pass rate
        "brief",  # the data columns the brief's rewards need
        "models", "vllm_support", "cputhreads",  # loading the policy for sampling
        "sandbox",  # the run_python tool runs the model's code only inside the sandbox
    },
    "diagnose": {
        "brief",  # the run's brief: its schedule and rewards explain the metrics
        "reward_registry",  # which logged rewards are verifiers
        "memory.shapes",  # a MoE finding needs the model's shape
        "models",  # is_moe: the one reading of a config.json's experts
        "rundir",  # the run's metrics, completions, evaluations, checkpoints and manifest
    },
    "evaluation": {
        "brief", "records", "models",
        "sampling",  # evaluation samples the trained model with the baseline's settings
        "rundir",  # the run's checkpoints, final model, end step, manifest and evaluation files
        "rewards.code",  # held_out_eval scores with the run's verified reward and tool bytes (VerifiedCode, a type)
    },
    "launch": {
        # the trainer builds the brief's rewards from the verified brief and runs custom reward, tool and
        # environment code from the bytes verification read (rewards.code), never from the writable run folder
        "rewards.build", "rewards.code",
        "brief", "models", "vllm_support", "cputhreads",
        "gate",  # launch re-verifies the gate before it trains
        "diagnose",  # a detached run's status names its last finding
        "evaluation.during",  # held-out evaluation during training
        "rundir",  # the manifest, checkpoints and the files training writes
        "render",  # launch renders the run again and refuses any file that differs from the run directory's
        "sampling.episode",  # a tool-use brief trains with the tools, template and parser its episodes were sampled with
    },
    "export": {
        "evaluation", "records", "models",
        "brief",  # the run's loaded Brief, which the model card describes
        "gate", "diagnose",  # the model card's evidence: the gate's verdicts and the run's diagnosis
        "rundir",  # which models the run saved, its metrics, evaluation and diagnosis
    },
    # The run directory: its file names, manifest, checkpoints, metrics and diagnosis (every verb reads a run
    # through it); it imports nothing of the package but the foundation.
    "rundir": set(),
    "models": set(),
    "vllm_support": set(),
    "cputhreads": set(),
    "testing": set(),  # tiny models for tests and the demo
    "fileio": set(),
    "cache": set(),
    "errors": set(),
    "locations": set(),
    "integrity": set(),
}
# Layers whose module-level imports (followed through the package) must reach no ML library.
CORE = ("cli", "commands", "brief", "gate", "render", "rewards", "records", "diagnose", "memory", "errors",
        "fileio", "locations", "sandbox", "broker")
HEAVY = {"torch", "transformers", "trl", "vllm", "peft", "accelerate", "datasets"}
# The bottom of the stack: these import no other module of the package (FOUNDATION's `fileio`, `errors` and the JSON
# value types of `jsonvalue` aside).
BOTTOM = ("reward_registry", "errors", "rundir")

# Imports that run against LAYERS and are not removed yet, as (importing module, imported module): the reason
# and what would remove them. A test fails when an entry is no longer taken.
EXCEPTIONS: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    source: str  # dotted module path below the package ("gate.context"), "" for the package itself
    target: str  # dotted module path below the package, or a top-level outside module ("torch")
    names: tuple[str, ...]  # names taken with `from ... import`
    line: int
    module_level: bool  # runs on import (not inside a function, not under TYPE_CHECKING)

    def where(self) -> str:
        return f"{self.source or ROOT}:{self.line}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(dotted: str) -> bool:
    """`dotted` (below the package) names a module or subpackage of the package."""
    base = PACKAGE.joinpath(*dotted.split(".")) if dotted else PACKAGE
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(path: Path) -> Iterator[Import]:
    source = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package_parts = source.split(".") if path.name == "__init__.py" else source.split(".")[:-1]

    def walk(node: ast.AST, module_level: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            level = module_level and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                level = False
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(source, below(alias.name), (), child.lineno, level)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package_parts[: len(package_parts) - child.level + 1]
                    full = ".".join([ROOT, *base, *([child.module] if child.module else [])])
                else:
                    full = child.module or ""
                target = below(full)
                names = tuple(a.name for a in child.names)
                if full.split(".")[0] == ROOT:
                    # `from llm_finetuning.rewards import registry` imports the module reward_registry
                    for name in names:
                        sub = f"{target}.{name}" if target else name
                        if is_module(sub):
                            yield Import(source, sub, (), child.lineno, level)
                    names = tuple(n for n in names if not is_module(f"{target}.{n}" if target else n))
                    if names or not child.names:
                        yield Import(source, target, names, child.lineno, level)
                else:
                    yield Import(source, target, names, child.lineno, level)
            yield from walk(child, level)

    yield from walk(tree, True)


def below(full: str) -> str:
    """The package's own modules lose the `llm_finetuning.` prefix (the package itself becomes ROOT); others
    keep their top-level name only."""
    if full == ROOT:
        return ROOT
    if full.startswith(ROOT + "."):
        return full[len(ROOT) + 1:]
    return full.split(".")[0]


def graph() -> list[Import]:
    return [imp for path in sorted(PACKAGE.rglob("*.py")) for imp in imports_of(path)]


def own(module: str) -> bool:
    return module == ROOT or is_module(module)


def layer_of(module: str) -> str:
    """The LAYERS key a module belongs to: the longest key that is the module or a package above it."""
    keys = [k for k in LAYERS if module == k or module.startswith(k + ".")]
    return max(keys, key=len) if keys else module.split(".")[0]


def covers(target: str, allowed: str) -> bool:
    return target == allowed or target.startswith(allowed + ".")


def test_every_module_belongs_to_a_layer() -> None:
    """A new subpackage or top-level module must be placed in LAYERS (or FOUNDATION) before it is imported."""
    tops = {module_name(p).split(".")[0] for p in PACKAGE.rglob("*.py") if module_name(p)}
    assert tops - set(LAYERS) - FOUNDATION == set(), "add these to LAYERS in tests/structure/test_layers.py"


def test_no_import_runs_up_the_layers() -> None:
    found = []
    for imp in graph():
        if not own(imp.target) or not imp.source:
            continue
        layer = layer_of(imp.source)
        if layer_of(imp.target) == layer or imp.target.split(".")[0] in FOUNDATION:
            continue
        if any(covers(imp.target, allowed) for allowed in LAYERS[layer]):
            continue
        if (imp.source, imp.target) in EXCEPTIONS:
            continue
        found.append(f"{imp.where()} ({layer}) imports {imp.target}")
    assert not found, "imports against the layers of docs/development.md (LAYERS in this file):\n" + "\n".join(found)


def cycles_of(edges: dict[str, set[str]]) -> list[str]:
    """Every cycle a depth-first walk of `edges` (node -> the nodes it imports) closes, as "a -> b -> a"."""
    cycles: list[str] = []
    on_path: list[str] = []
    done: set[str] = set()

    def visit(node: str) -> None:
        on_path.append(node)
        for target in sorted(edges.get(node, ())):
            if target in on_path:
                cycles.append(" -> ".join([*on_path[on_path.index(target):], target]))
            elif target not in done:
                visit(target)
        on_path.pop()
        done.add(node)

    for node in sorted(edges):
        if node not in done:
            visit(node)
    return cycles


def test_no_modules_import_each_other_in_a_cycle() -> None:
    """The package's modules (a package's `__init__` among them) import one another in no cycle, imports inside
    functions included: a cycle through a lazy import is still two modules that need each other, as the sampling
    backends and the backend factory once did. What both sides need goes in a module that imports neither."""
    edges: dict[str, set[str]] = {}
    for imp in graph():
        if imp.source and own(imp.target) and imp.target not in (ROOT, imp.source):
            edges.setdefault(imp.source, set()).add(imp.target)
    cycles = cycles_of(edges)
    assert not cycles, ("modules that import each other (move what they share into a module both import):\n"
                        + "\n".join(cycles))


def test_no_subpackages_import_each_other_in_a_cycle() -> None:
    """Nor do the package's subpackages and top-level modules, counted whole: `brief` importing one module of
    `rewards` while a module of `rewards` imports `brief` is a cycle even when no two modules close it. What the
    lower one needs moves down (the reward registry out of `rewards`, the run directory's files into `rundir`)."""
    edges: dict[str, set[str]] = {}
    for imp in graph():
        if not imp.source or not own(imp.target) or imp.target == ROOT:
            continue
        source, target = imp.source.split(".")[0], imp.target.split(".")[0]
        if source != target and target not in FOUNDATION:
            edges.setdefault(source, set()).add(target)
    cycles = cycles_of(edges)
    assert not cycles, ("subpackages that import each other (move what the lower one needs below both):\n"
                        + "\n".join(cycles))


def test_the_exceptions_are_still_needed() -> None:
    edges = {(imp.source, imp.target) for imp in graph()}
    assert set(EXCEPTIONS) <= edges, f"stale entries in EXCEPTIONS: {sorted(set(EXCEPTIONS) - edges)}"


def test_every_allowed_edge_is_used() -> None:
    """An allowed edge nothing takes any longer is a layer table that no longer tells the truth."""
    used = {(layer_of(imp.source), allowed) for imp in graph() if imp.source and own(imp.target)
            for allowed in LAYERS[layer_of(imp.source)] if covers(imp.target, allowed)}
    declared = {(layer, allowed) for layer, targets in LAYERS.items() for allowed in targets}
    assert declared <= used, f"edges in LAYERS that no import takes: {sorted(declared - used)}"


def test_the_bottom_imports_nothing_of_the_package() -> None:
    found = [f"{imp.where()} imports {imp.target}" for imp in graph()
             if imp.source and layer_of(imp.source) in BOTTOM and own(imp.target)
             and imp.target not in ("errors", "fileio", "integrity", "jsonvalue", ROOT)  # jsonvalue: types, stdlib only
             and layer_of(imp.target) != layer_of(imp.source)]
    assert not found, "\n".join(found)


def test_the_core_imports_no_ml_library_at_module_level() -> None:
    """Followed through the package's own module-level imports (and the `__init__` of every package on the way):
    importing a core module must not import torch, transformers, trl, vllm, peft, accelerate or datasets."""
    module_level: dict[str, list[Import]] = {}
    for imp in graph():
        if imp.module_level:
            module_level.setdefault(imp.source, []).append(imp)

    def with_parents(module: str) -> list[str]:
        parts = module.split(".")
        return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]

    found = []
    roots = sorted({module_name(p) for p in PACKAGE.rglob("*.py")} - {""})
    for root in (r for r in roots if r.split(".")[0] in CORE):
        seen: dict[str, str] = {}  # module -> the module that imported it
        todo = [(m, root) for m in ["", *with_parents(root)]]
        while todo:
            module, parent = todo.pop()
            if module in seen:
                continue
            seen[module] = parent
            for imp in module_level.get(module, []):
                if imp.target in HEAVY:
                    chain = [module]
                    while chain[-1] != root and seen.get(chain[-1], root) != chain[-1]:
                        chain.append(seen[chain[-1]])
                    found.append(f"{root}: {' <- '.join(chain)} imports {imp.target} at line {imp.line}")
                elif own(imp.target) and imp.target != ROOT:
                    todo += [(m, module) for m in with_parents(imp.target) if m not in seen]
    assert not found, "import ML libraries inside the function that needs them:\n" + "\n".join(sorted(set(found)))


def test_no_package_imports_another_packages_private_names() -> None:
    """No `from llm_finetuning.brief.docgen import _bounds` outside brief/, no `import ...sandbox._zygote` outside
    sandbox/, and no `module._name` on a module of another package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path)
        mine = source.split(".")[0] if source else ROOT
        if mine == "cli":
            mine = "commands"  # cli.py is the commands' entry point
        aliases: dict[str, str] = {}  # local name -> module of another package
        for imp in imports_of(path):
            if not own(imp.target) or imp.target == ROOT or imp.target.split(".")[0] == mine:
                continue
            private = [p for p in imp.target.split(".") + list(imp.names) if p.startswith("_") and not p.startswith("__")]
            if private:
                found.append(f"{imp.where()} imports {imp.target}{' ' + ', '.join(imp.names) if imp.names else ''}")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(ROOT):
                for alias in node.names:
                    target = below(f"{node.module}.{alias.name}")
                    if is_module(target) and target.split(".")[0] != mine:
                        aliases[alias.asname or alias.name] = target
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name.startswith(ROOT + ".") and below(alias.name).split(".")[0] != mine:
                        aliases[alias.asname] = below(alias.name)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                found.append(f"{source}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    assert not found, "make the shared part public in its own package:\n" + "\n".join(found)
