"""Run configuration: one dataclass whose fields are the CLI options and the notebook parameters.

``TrainConfig`` extends the core's ``AgentConfig`` with what makes a run. Fields left as ``None`` are
filled from the algorithm table (``ALGORITHMS``: docs/experiment.md, tuned for Atari), a variant's
values, and for classic-control envs such as CartPole from ``CLASSIC_CONTROL_DEFAULTS``.
``validate`` turns bad input into one clear ``RLHelpersError``; ``resolve_config`` does that once
and settles the device and the W&B mode (online with an API key, else offline).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from rlhelpers.core.config import EVAL_SEED_OFFSET, AgentConfig, resolve_device
from rlhelpers.core.envs import ATARI_ENTRY_POINT, check_supported, env_spec
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.losses import ALGORITHMS
from rlhelpers.runner.files import DEFAULT_RUNS_DIR
from rlhelpers.runner.tracking import resolve_wandb_mode

ALGOS = tuple(ALGORITHMS)  # the report compares every algorithm of the table
REPORT_SEEDS = (0, 100)  # the report's two seeds of every algorithm
RUN_NAME_SEPARATOR = "_seed-"
RUN_NAME_PATTERN = re.compile(rf"^(?P<algo>.+){RUN_NAME_SEPARATOR}(?P<seed>-?[0-9]+)$")

# Named changes of an algorithm's hyperparameters, for controlled experiments beside the report's runs.
# A variant is part of the run's name (``task1-pg1_seed-0``) and of its identity; its values are the
# defaults of the run, and an explicit value that contradicts them is refused.
VARIANTS: dict[str, dict[str, float]] = {
    "pg1": {"pg_coef": 1.0},  # A2C's actor weight: does task1's small actor step explain its slower learning?
    # All of A2C's coefficients and its learning rate: at equal hyperparameters, is the all-action method slower?
    "a2chp": {"lr": 7e-4, "pg_coef": 1.0, "vf_coef": 0.25, "ent_coef": 0.01},
}


def whole_number(value: str | float) -> int:
    """An integer written as text or as a whole float: ``10000000``, ``1e7``, ``1_000_000``, or the 5000.0 that
    papermill passes for ``-p total_timesteps 5e3``. Anything else raises ``ValueError``."""
    number = value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"invalid integer: {value!r}") from None
    if isinstance(number, bool) or not float(number).is_integer():
        raise ValueError(f"not a whole number: {value!r}")
    return int(number)


def format_run_name(algo: str, seed: int, variant: str = "") -> str:
    """The name of a run's directory and W&B run: ``<algo>_seed-<seed>``, or ``<algo>-<variant>_seed-<seed>``."""
    return f"{algo}{'-' + variant if variant else ''}{RUN_NAME_SEPARATOR}{seed}"


def _changes_algo(variant: str, algo: str) -> bool:
    return any(ALGORITHMS[algo].defaults.get(name) != value for name, value in VARIANTS[variant].items())


# What a campaign can train: every algorithm, and every algorithm with a variant that changes it (task1-pg1).
ARMS = ALGOS + tuple(f"{algo}-{variant}" for variant in VARIANTS for algo in ALGOS if _changes_algo(variant, algo))


def parse_arm(arm: str) -> tuple[str, str]:
    """``(algo, variant)`` of an arm of ``ARMS``: ``task1`` is ``("task1", "")``, ``task1-pg1`` ``("task1", "pg1")``."""
    check_choice("arm", arm, ARMS)
    algo, _, variant = arm.partition("-")
    return algo, variant


def expected_runs(algos: tuple[str, ...] = ALGOS, seeds: tuple[int, ...] = REPORT_SEEDS) -> list[str]:
    """Run names the report is made of: every algo with every seed."""
    return [format_run_name(algo, seed) for algo in algos for seed in seeds]


def parse_run_name(name: str) -> tuple[str, int]:
    """``(algo, seed)`` from a ``format_run_name`` name."""
    match = RUN_NAME_PATTERN.match(name)
    if match is None or format_run_name(match["algo"], int(match["seed"])) != name:
        raise ValueError(f"{name!r} is not a run name of the form <algo>{RUN_NAME_SEPARATOR}<seed>")
    return match["algo"], int(match["seed"])


# Atari run shape of docs/experiment.md; stop_return 18 is Pong's "solved" (other games: pass --stop-return).
ATARI_DEFAULTS: dict[str, float] = {"n_envs": 16, "eval_interval": 300_000, "stop_return": 18.0}

# Classic control (CartPole-v1): stop_return is the env's reward_threshold (475). With the Atari settings the
# critic term dominates the clipped gradient norm and the policy moves slowly; more updates per step (8 envs)
# and a larger lr let every algorithm solve CartPole within 300k steps (tests/test_learning.py).
CLASSIC_CONTROL_DEFAULTS: dict[str, float] = {"n_envs": 8, "lr": 7e-3, "ent_coef": 0.0, "eval_interval": 10_000}


@dataclass
class TrainConfig(AgentConfig):
    """Everything that defines one run (algo, seed) and how it is trained, evaluated and saved."""

    variant: str = field(
        default="",
        metadata={"help": "a named change of the algorithm's hyperparameters, added to the run name: "
                          + ", ".join(f"{name} ({', '.join(f'{k} {v:g}' for k, v in values.items())})"
                                      for name, values in VARIANTS.items()),
                  "default": "none"},
    )
    total_timesteps: int = field(
        default=10_000_000,
        metadata={"help": "training budget in environment steps, summed over all envs (the report's runs: 10M)"},
    )
    eval_interval: int | None = field(
        default=None, metadata={"help": "environment steps between evaluations (Atari: 300000)"}
    )
    stop_return: float | None = field(
        default=None,
        metadata={"help": "stop once the mean evaluation return exceeds this (Atari: 18; else the env's threshold)"},
    )
    checkpoint_interval_s: float = field(
        default=300.0, metadata={"help": "wall-clock seconds between checkpoints (besides each evaluation)"}
    )
    keep_checkpoints: int = field(default=3, metadata={"help": "how many step-numbered checkpoints to keep"})
    snapshot_interval: int = field(
        default=1_000_000,
        metadata={"help": "environment steps between model-weight snapshots (snapshots/, for the analysis)"},
    )
    runs_dir: str = field(default=DEFAULT_RUNS_DIR, metadata={"help": "directory holding one sub-directory per run"})
    wandb_project: str = field(default="pong-actor-critic", metadata={"help": "W&B project"})
    wandb_entity: str | None = field(
        default=None, metadata={"help": "W&B entity (user or team)", "default": "your API key's default entity"}
    )
    wandb_mode: str | None = field(
        default=None,
        metadata={"help": "online, offline or disabled", "default": "online with an API key, else offline"},
    )

    def __post_init__(self) -> None:
        if isinstance(self.runs_dir, os.PathLike):
            self.runs_dir = os.fspath(self.runs_dir)
        for name in _integer_fields():
            if isinstance(getattr(self, name), float):
                with contextlib.suppress(ValueError):  # a fraction stays, for validate to refuse
                    setattr(self, name, whole_number(getattr(self, name)))
        for name, value in {**env_defaults(self.algo, self.env_id), **VARIANTS.get(self.variant, {})}.items():
            if getattr(self, name) is None:
                setattr(self, name, value)

    @property
    def run_name(self) -> str:
        """Run name used for the directory and the W&B run (``format_run_name``)."""
        return format_run_name(self.algo, self.seed, self.variant)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON view of the config as runs save it: without ``runs_dir``, since where a run lives is
        not part of what it is (a saved path goes stale when the run moves, and names the machine)."""
        values = dataclasses.asdict(self)
        del values["runs_dir"]
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """Rebuild a config from ``to_dict`` output, ignoring keys this version does not know."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


@functools.cache
def _integer_fields() -> tuple[str, ...]:
    return tuple(name for name, hint in typing.get_type_hints(TrainConfig).items()
                 if int in (typing.get_args(hint) or (hint,)))


def env_defaults(algo: str, env_id: str) -> dict[str, float]:
    """Values for the fields left as None: the algorithm's, then those of the kind of env."""
    values: dict[str, float] = ALGORITHMS[algo].defaults if algo in ALGORITHMS else {}
    try:
        spec = env_spec(env_id)
    except RLHelpersError:
        return values  # validate() reports the unknown id
    if spec.entry_point == ATARI_ENTRY_POINT:
        values.update(ATARI_DEFAULTS)
    else:
        values.update(CLASSIC_CONTROL_DEFAULTS)
        values["stop_return"] = spec.reward_threshold if spec.reward_threshold is not None else float("inf")
    return values


# Fields that define what a run *is*: a saved run whose value differs cannot be resumed with the new one.
# total_timesteps, eval/checkpoint cadence, device, paths and W&B settings may change between sessions.
IDENTITY_FIELDS = (
    "algo", "variant", "seed", "env_id", "n_envs", "n_steps", "gamma", "lr", "pg_coef", "vf_coef", "ent_coef",
    "max_grad_norm", "rms_alpha", "rms_eps", "hidden_size",
)

WANDB_MODES = ("online", "offline", "disabled")


def _check_types(config: TrainConfig) -> None:
    """Raise ``RLHelpersError`` for the first field holding a value of another type (papermill's -r passes text)."""
    for name, hint in typing.get_type_hints(TrainConfig).items():
        value, types = getattr(config, name), typing.get_args(hint) or (hint,)
        if value is None and type(None) in types:
            continue
        papermill = " (papermill's -r passes text: use -p)" if isinstance(value, str) else ""
        if float in types and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise RLHelpersError(f"{name} must be a number, got {value!r}{papermill}")
        if int in types and (isinstance(value, bool) or not isinstance(value, int)):
            raise RLHelpersError(f"{name} must be an integer, got {value!r}{papermill}")
        if str in types and not isinstance(value, str):
            raise RLHelpersError(f"{name} must be text, got {value!r}")


def check_choice(what: str, value: object, choices: Iterable[str]) -> None:
    """Raise ``RLHelpersError`` unless ``value`` is one of ``choices``, naming them."""
    if value not in choices:
        raise RLHelpersError(f"unknown {what} {value!r}: choose one of {', '.join(choices)}")


def validate(config: TrainConfig) -> TrainConfig:
    """Raise ``RLHelpersError`` naming the first bad value; return the config unchanged otherwise."""
    _check_types(config)
    check_choice("algo", config.algo, ALGORITHMS)
    if config.variant:
        check_choice("variant", config.variant, VARIANTS)
        changes = VARIANTS[config.variant]
        contradicted = [f"{name} {changes[name]:g}, got {getattr(config, name)!r}" for name in changes
                        if getattr(config, name) != changes[name]]
        if contradicted:
            raise RLHelpersError(f"variant {config.variant} means {'; '.join(contradicted)}")
        if not _changes_algo(config.variant, config.algo):
            raise RLHelpersError(f"variant {config.variant} changes nothing for {config.algo}: train it without one")
    check_supported(config.env_id)
    for name in ("total_timesteps", "n_envs", "n_steps", "eval_interval", "n_eval_episodes", "n_eval_envs",
                 "hidden_size", "keep_checkpoints", "snapshot_interval"):
        if getattr(config, name) <= 0:
            raise RLHelpersError(f"{name} must be a positive integer, got {getattr(config, name)!r}")
    for name in ("lr", "max_grad_norm", "rms_eps", "checkpoint_interval_s"):
        if not getattr(config, name) > 0:
            raise RLHelpersError(f"{name} must be positive, got {getattr(config, name)!r}")
    if config.env_groups > config.n_envs:
        raise RLHelpersError(f"env_groups must be at most n_envs ({config.n_envs}), got {config.env_groups!r}")
    if not 0.0 <= config.gamma <= 1.0:
        raise RLHelpersError(f"gamma must lie in [0, 1], got {config.gamma!r}")
    if not 0.0 < config.rms_alpha < 1.0:
        raise RLHelpersError(f"rms_alpha must lie in (0, 1), got {config.rms_alpha!r}")
    for name in ("pg_coef", "vf_coef", "ent_coef"):
        if getattr(config, name) < 0:
            raise RLHelpersError(f"{name} must be non-negative, got {getattr(config, name)!r}")
    for name in ("seed", "torch_threads", "env_threads", "env_groups"):
        if getattr(config, name) < 0:
            raise RLHelpersError(f"{name} must be a non-negative integer, got {getattr(config, name)!r}")
    n_evals = config.total_timesteps // config.eval_interval + 2
    if (config.seed + config.total_timesteps + config.n_envs > EVAL_SEED_OFFSET
            or config.seed + n_evals * config.n_eval_envs >= EVAL_SEED_OFFSET):
        raise RLHelpersError(f"seed + total_timesteps is too large for the environments' int32 seeds "
                             f"(at most {EVAL_SEED_OFFSET:,} together)")
    if config.wandb_mode is not None:
        check_choice("wandb_mode", config.wandb_mode, WANDB_MODES)
    if config.device != "auto" and not config.device.startswith(("cpu", "cuda", "mps")):
        raise RLHelpersError(f"unknown device {config.device!r}: use auto, cpu, cuda or mps")
    return config


def config_differences(saved: dict[str, Any], requested: TrainConfig) -> list[str]:
    """Identity fields on which a saved run's config and the requested one disagree, as ``name: a != b``."""
    wanted = requested.to_dict()
    saved = {"variant": "", **saved}  # runs saved before variants existed have none
    differences = [f"{name}: saved {saved.get(name)!r} != requested {wanted[name]!r}"
                   for name in IDENTITY_FIELDS if saved.get(name) != wanted[name]]
    if saved.get("precision", "fp32") != "fp32":  # earlier versions could train the encoder in bfloat16
        differences.append(f"precision: saved {saved['precision']!r}, while this version trains in fp32 only")
    return differences


def resolve_config(config: TrainConfig) -> tuple[TrainConfig, torch.device]:
    """Validate ``config`` and resolve it for this machine: the config with ``wandb_mode`` set to the mode
    W&B runs in (``resolve_wandb_mode``), and the torch device. ``device`` stays as given, so a saved run
    keeps ``auto``."""
    validate(config)
    wandb_mode = resolve_wandb_mode(config.wandb_mode)
    return dataclasses.replace(config, wandb_mode=wandb_mode), resolve_device(config.device)
