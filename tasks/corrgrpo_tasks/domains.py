"""What a task domain and a training framework are: one :class:`DomainSpec` per domain, one
:class:`FrameworkSpec` per framework, declared here once (for the tasks what ``EstimatorSpec`` is for the core).

The recipes, the pipeline, the GPU smoke runs, ``corrgrpo evaluate`` and verl's reward file read these
specs; nothing else in ``corrgrpo_tasks`` branches on a domain or framework name. What a domain's reward
declares itself (its ``COMPONENTS``, ``DEFAULT_WEIGHTS``, ``PROFILES``, ``compute_score``, TRL reward
functions) is read from its package when asked, never copied here. Importing this module imports no
domain package and no framework.

A domain has one spelling (its package name: ``tool_calling``); the hyphenated form the evaluation used to
take (``tool-calling``) is accepted by :func:`parse_domain` with a note.

>>> parse_domain("tool-calling"), get_domain("code").frameworks
('tool_calling', ('verl', 'trl', 'openrlhf'))
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DOMAINS",
    "FRAMEWORKS",
    "DomainSpec",
    "FrameworkSpec",
    "domain_argument",
    "domain_for_benchmark",
    "domain_for_source",
    "domain_metavar",
    "domain_names",
    "framework_names",
    "get_domain",
    "get_framework",
    "parse_domain",
    "register_domain",
    "resolve",
    "spelling",
    "spelling_argument",
]

_PACKAGE = Path(__file__).resolve().parent


def resolve(entry: str) -> Any:
    """An entry point ``"package.module:attribute"`` loaded, or a file ``"folder/file.py"`` of this package as
    its absolute path (frameworks that load a file by path: OpenRLHF's reward and agent files, verl's configs).

    >>> resolve("recipes/verl_reward.py").name, resolve("corrgrpo_tasks.domains:parse_domain").__name__
    ('verl_reward.py', 'parse_domain')
    """
    module, sep, attribute = entry.partition(":")
    if not sep:
        return _PACKAGE / entry
    value: Any = importlib.import_module(module)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


@dataclass(frozen=True)
class FrameworkSpec:
    """A training framework the recipes launch.

    ``builder`` (an entry point) turns ``(domain, estimator, HParams, extra)`` into a ``Recipe``;
    ``checkpoint`` says what its trainer saves: ``"huggingface"`` (a folder ``corrgrpo evaluate`` loads),
    ``"verl_fsdp"`` (shards that ``corrgrpo pipeline`` merges with verl's own merger), or ``None``
    (the pipeline does not run this framework).
    """

    name: str
    builder: str
    checkpoint: str | None = None


@dataclass(frozen=True)
class DomainSpec:
    """Everything the launchers and the evaluation need to know about one task domain.

    ``package`` is the domain's package; it (or ``reward_module``) declares ``COMPONENTS``,
    ``DEFAULT_WEIGHTS``, ``PROFILES`` and ``compute_score(data_source, solution, ground_truth, extra_info,
    **kw)`` (verl's convention).
    ``data_sources``: verl's ``data_source`` values routed to that reward (``None``: the package's own
    ``DATA_SOURCES`` or ``DATA_SOURCE``). ``rewards`` and ``agent_loops``: per framework, an entry point or
    a file (:func:`resolve`) -- the reward a framework calls, and for multi-turn domains the loop that plays
    the episode. ``hparams``: the paper's settings, over ``recipes.HParams``' defaults. ``benchmarks``: the
    names ``corrgrpo evaluate`` runs for the domain (each one a ``Benchmark`` in ``evaluation``).
    ``smoke``: the GPU smoke run's fixture (:mod:`corrgrpo_tasks.gpu_smoke`), if the domain has one.
    """

    name: str
    package: str
    frameworks: tuple[str, ...]
    hparams: Mapping[str, Any]
    rewards: Mapping[str, str]
    agent_loops: Mapping[str, str] = field(default_factory=dict)
    benchmarks: tuple[str, ...] = ()
    data_sources: tuple[str, ...] | None = None
    aliases: tuple[str, ...] = ()
    openrlhf_data_keys: tuple[str, str] = ("prompt", "ground_truth")
    """The dataset columns OpenRLHF reads (``--data.input_key``, ``--data.label_key``)."""
    trl_tokenizer: bool = False
    """TRL trains with the model's tokenizer loaded left-padded (the reward decodes tokens, or the tool loop
    parses turns) rather than TRL's default processing class."""
    smoke: str | None = None
    reward_module: str | None = None
    """The module declaring the reward's names when the package does not export them all."""

    def module(self) -> Any:
        """The module declaring the reward (``reward_module``, else the package), imported."""
        return importlib.import_module(self.reward_module or self.package)

    @property
    def components(self) -> tuple[str, ...]:
        """The reward's components, in the estimator's order (the package's ``COMPONENTS``)."""
        return tuple(self.module().COMPONENTS)

    @property
    def default_weights(self) -> tuple[float, ...]:
        """The reward's own component weights (the package's ``DEFAULT_WEIGHTS``)."""
        return tuple(self.module().DEFAULT_WEIGHTS)

    @property
    def profiles(self) -> tuple[str, ...]:
        """The reward's definitions (``"paper"``, ``"hardened"``: the package's ``PROFILES``)."""
        return tuple(self.module().PROFILES)

    @property
    def compute_score(self) -> Callable[..., dict[str, float]]:
        score: Callable[..., dict[str, float]] = self.module().compute_score
        return score

    def sources(self) -> tuple[str, ...]:
        """verl's ``data_source`` values this domain's reward scores."""
        if self.data_sources is not None:
            return self.data_sources
        module = self.module()
        found = getattr(module, "DATA_SOURCES", None)
        return tuple(found) if found is not None else (str(module.DATA_SOURCE),)

    def reward(self, framework: str) -> Any:
        """The reward entry of ``framework`` (a TRL reward-function factory, an OpenRLHF reward file, ...)."""
        return resolve(self.rewards[framework])

    def agent_loop(self, framework: str) -> Any | None:
        """The multi-turn loop of ``framework`` for this domain, or ``None`` for a single-turn domain."""
        entry = self.agent_loops.get(framework)
        return None if entry is None else resolve(entry)

    def recipe_defaults(self) -> dict[str, Any]:
        """The keyword arguments of the domain's ``recipes.HParams``: the paper's settings, the reward's
        components and, for a multi-turn domain, verl's agent-loop config."""
        loop = self.agent_loops.get("verl")
        return {
            **self.hparams,
            "reward_keys": self.components,
            **({"agent_loop_config": str(resolve(loop))} if loop else {}),
        }


FRAMEWORKS: dict[str, FrameworkSpec] = {
    f.name: f
    for f in (
        FrameworkSpec("verl", "corrgrpo_tasks.recipes._builders:build_verl", checkpoint="verl_fsdp"),
        FrameworkSpec("trl", "corrgrpo_tasks.recipes._builders:build_trl", checkpoint="huggingface"),
        FrameworkSpec("openrlhf", "corrgrpo_tasks.recipes._builders:build_openrlhf"),
    )
}

_ALL = tuple(FRAMEWORKS)
_VERL_REWARD = "recipes/verl_reward.py"  # one file for every domain: it dispatches on data_source

DOMAINS: dict[str, DomainSpec] = {}


def register_domain(spec: DomainSpec) -> DomainSpec:
    """Add ``spec`` (a new domain, or a replacement of one by name); returns it.

    Its frameworks must be known, and its name and aliases must not spell another domain.
    """
    unknown = [f for f in spec.frameworks if f not in FRAMEWORKS]
    if unknown:
        raise ValueError(f"domain {spec.name!r}: unknown frameworks {unknown}; known: {list(FRAMEWORKS)}")
    for spelling in (spec.name, *spec.aliases):
        owner = _spellings().get(spelling)
        if owner is not None and owner != spec.name:
            raise ValueError(f"domain {spec.name!r}: {spelling!r} already spells domain {owner!r}")
    DOMAINS[spec.name] = spec
    return spec


for _spec in (
    DomainSpec(
        "code",
        "corrgrpo_tasks.code",
        _ALL,
        {
            "model": "Qwen/Qwen2.5-Coder-7B-Instruct",
            "train_files": "data/leetcode/train.parquet",
            "val_files": "data/leetcode/test.parquet",
            "train_batch_size": 64,
            "group_size": 8,
            "mini_batch_size": 32,
            "max_prompt_length": 4096,
            "max_response_length": 2048,
            "use_kl_loss": True,
            "gpu_memory_utilization": 0.72,
        },
        {
            "verl": _VERL_REWARD,
            "trl": "corrgrpo_tasks.code:trl_reward_functions",
            "openrlhf": "recipes/openrlhf_reward_code.py",
        },
        benchmarks=("humaneval", "mbpp", "livecodebench"),
        data_sources=("leetcodedataset", "leetcode", "humaneval", "mbpp", "livecodebench"),
        openrlhf_data_keys=("input", "label"),
        smoke="corrgrpo_tasks.gpu_smoke._run:CODE",
        reward_module="corrgrpo_tasks.code._reward",  # its PROFILES are not re-exported by the package
    ),
    DomainSpec(
        "tool_calling",
        "corrgrpo_tasks.tool_calling",
        _ALL,
        {
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "train_files": "data/rlla/train.parquet",
            "val_files": "data/rlla/test.parquet",
        },
        {
            "verl": _VERL_REWARD,
            "trl": "corrgrpo_tasks.tool_calling:trl_reward_functions",
            "openrlhf": "recipes/openrlhf_reward_tool_calling.py",
        },
        benchmarks=("rlla-test", "api-bank"),
        aliases=("tool-calling",),
        trl_tokenizer=True,
        smoke="corrgrpo_tasks.gpu_smoke._run:TOOL_CALLING",
    ),
    DomainSpec(
        "agent_security",
        "corrgrpo_tasks.agent_security",
        _ALL,
        {
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "train_files": "data/agentdojo/train.parquet",
            "val_files": "data/agentdojo/test.parquet",
            "train_batch_size": 16,
            "group_size": 8,
            "mini_batch_size": 16,
            "epochs": 7,
            "max_prompt_length": 12288,
            "max_response_length": 8192,
            "max_token_len_per_gpu": 32768,
            "use_kl_loss": True,
            "gpu_memory_utilization": 0.75,
            "multi_turn": True,
        },
        {"verl": _VERL_REWARD, "trl": "corrgrpo_tasks.agent_security:trl_reward_functions"},
        agent_loops={
            "verl": "corrgrpo_tasks.agent_security:AGENT_LOOP_CONFIG",
            "trl": "corrgrpo_tasks.agent_security.trl_env:trl_episode_setup",
            "openrlhf": "agent_security/openrlhf_agent.py",
        },
        benchmarks=("agentdojo", "asb", "injecagent"),
        aliases=("agent-security",),
        trl_tokenizer=True,
        smoke="corrgrpo_tasks.gpu_smoke._run:AGENT_SECURITY",
    ),
):
    DOMAINS[_spec.name] = _spec


def _spellings() -> dict[str, str]:
    return {s: d.name for d in DOMAINS.values() for s in (d.name, *d.aliases)}


def domain_names() -> tuple[str, ...]:
    """The domains, in declaration order."""
    return tuple(DOMAINS)


def framework_names() -> tuple[str, ...]:
    """The frameworks, in declaration order."""
    return tuple(FRAMEWORKS)


def parse_domain(text: str, *, note: Callable[[str], None] | None = None) -> str:
    """The domain's one spelling for ``text`` (an alias such as ``tool-calling`` is accepted, and ``note``
    is told so); a ``ValueError`` naming the domains otherwise. What every command's domain argument
    takes (``corrgrpo-recipe``, ``corrgrpo evaluate``, ``corrgrpo pipeline``, ``corrgrpo train --task``).

    >>> parse_domain("agent-security", note=print)
    note: 'agent-security' is spelled 'agent_security'
    'agent_security'
    """
    name = _spellings().get(text)
    if name is None:
        raise ValueError(f"unknown domain {text!r}; known: {', '.join(DOMAINS)}")
    if name != text and note is not None:
        note(f"note: {text!r} is spelled {name!r}")
    return name


def domain_argument(text: str) -> str:
    """:func:`parse_domain` as an ``argparse`` type: the note about an alias goes to stderr, an unknown
    domain is argparse's usage error."""
    try:
        return parse_domain(text, note=lambda line: print(line, file=sys.stderr))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def spelling(text: str, *, note: Callable[[str], None] | None = None) -> str:
    """The one spelling of ``text`` if it spells a domain, else ``text`` as given (for a command whose
    choices hold more than the domains, such as ``corrgrpo train --task``, which also has ``scales``).

    >>> spelling("tool-calling"), spelling("scales")
    ('tool_calling', 'scales')
    """
    return parse_domain(text, note=note) if text in _spellings() else text


def spelling_argument(text: str) -> str:
    """:func:`spelling` as an ``argparse`` type, with the note on stderr; argparse then checks the
    command's own ``choices`` (``p.add_argument("--task", type=spelling_argument, choices=TASKS)``)."""
    return spelling(text, note=lambda line: print(line, file=sys.stderr))


def domain_metavar() -> str:
    """The domain argument's metavar: ``{code,tool_calling,agent_security}``."""
    return "{" + ",".join(DOMAINS) + "}"


def get_domain(name: str) -> DomainSpec:
    """The spec of the domain ``name`` (any spelling :func:`parse_domain` takes)."""
    return DOMAINS[parse_domain(name)]


def get_framework(name: str) -> FrameworkSpec:
    """The spec of the framework ``name``; a ``ValueError`` naming the frameworks otherwise."""
    if name not in FRAMEWORKS:
        raise ValueError(f"unknown framework {name!r}; known: {', '.join(FRAMEWORKS)}")
    return FRAMEWORKS[name]


def domain_for_source(data_source: str) -> DomainSpec:
    """The domain whose reward scores verl's ``data_source`` (imports the domains' packages to ask them)."""
    for spec in DOMAINS.values():
        if data_source in spec.sources():
            return spec
    known = [s for spec in DOMAINS.values() for s in spec.sources()]
    raise ValueError(f"no corrgrpo reward for data_source {data_source!r}; known: {known}")


def domain_for_benchmark(benchmark: str) -> DomainSpec:
    """The domain whose spec lists ``benchmark``."""
    for spec in DOMAINS.values():
        if benchmark in spec.benchmarks:
            return spec
    raise ValueError(f"benchmark {benchmark!r} belongs to no domain")
