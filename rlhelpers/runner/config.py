"""Run configuration: one dataclass whose fields are the CLI options and the notebook parameters.

``TrainConfig`` extends the core's ``AgentConfig`` with what makes a run. Fields left as ``None`` take the
run's defaults (``rlhelpers.core.config.run_defaults``: the algorithm table and the
kind of env). ``validate`` turns bad input into one clear ``RLHelpersError``. A run's name is its arm (the algorithm,
or ``<algo>-<variant>``, the variant a name its caller gives to a change of hyperparameters) and its seed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Collection
from typing import Any, get_args, get_type_hints

from rlhelpers.core.config import EVAL_SEED_OFFSET, AgentConfig, option, run_defaults
from rlhelpers.core.envs import atari_game, check_supported
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.losses import ALGORITHMS

DEFAULT_RUNS_DIR = "runs"  # the committed runs, and the default of every command and of the notebook off Colab
RUN_NAME_SEPARATOR = "_seed-"
RUN_NAME_PATTERN = re.compile(rf"^(?P<arm>.+){RUN_NAME_SEPARATOR}(?P<seed>-?[0-9]+)$")
GAME_SETTINGS = ("life_loss", "fire_reset")  # how a game's episodes are cut and restarted (``core.envs``)

VARIANT_PATTERN = re.compile(r"^[A-Za-z0-9]+$")  # a variant's name: letters and digits, so that run names parse


def whole_number(value: str | float) -> int:
    """An integer written as text or as a whole float: ``10000000``, ``1e7``, ``1_000_000``, or the 5000.0 that
    papermill passes for ``-p total_timesteps 5e3``. Anything else raises ``ValueError``."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return int(value)  # exact, also beyond a float's 2**53
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"invalid integer: {value!r}") from None
    if isinstance(value, bool) or not number.is_integer():
        raise ValueError(f"not a whole number: {value!r}")
    return value if isinstance(value, int) else int(number)


def arm_name(algo: str, variant: str = "") -> str:
    """What a run is a seed of: its algorithm, or ``<algo>-<variant>``."""
    return f"{algo}-{variant}" if variant else algo


def format_run_name(arm: str, seed: int) -> str:
    """The name of a run's directory and W&B run: ``<arm>_seed-<seed>``."""
    return f"{arm}{RUN_NAME_SEPARATOR}{seed}"


def parse_run_name(name: str) -> tuple[str, int]:
    """``(arm, seed)`` from a ``format_run_name`` name."""
    match = RUN_NAME_PATTERN.match(name)
    if match is None or format_run_name(match["arm"], int(match["seed"])) != name:
        raise ValueError(f"{name!r} is not a run name of the form <arm>{RUN_NAME_SEPARATOR}<seed>")
    return match["arm"], int(match["seed"])


def exceeds(mean_return: float, stop_return: float | None) -> bool:
    """Whether an evaluation's mean return stops a run at ``stop_return`` (None: no early stop)."""
    return stop_return is not None and mean_return > stop_return


@dataclasses.dataclass
class TrainConfig(AgentConfig):
    """Everything that defines one run (algo, seed) and how it is trained, evaluated and saved."""

    variant: str = option("", "a name for the run's change of the algorithm's hyperparameters (given by their own "
                          "options), added to the run name: <algo>-<variant>_seed-<seed>", default="none")
    total_timesteps: int = option(10_000_000, "training budget in environment steps, summed over all envs")
    eval_interval: int | None = option(None, "environment steps between evaluations")
    stop_return: float | None = option(None, "stop once the mean evaluation return exceeds this")
    checkpoint_interval_s: float = option(300.0, "wall-clock seconds between checkpoints (besides each evaluation)")
    keep_checkpoints: int = option(3, "how many step-numbered checkpoints to keep")
    snapshot_interval: int = option(1_000_000, "environment steps between model-weight snapshots (snapshots/, for "
                                    "the analysis)")
    runs_dir: str = option(DEFAULT_RUNS_DIR, "directory holding one sub-directory per run")
    wandb_project: str | None = option(None, "W&B project", default="<game>-actor-critic, e.g. pong-actor-critic")
    wandb_entity: str | None = option(None, "W&B entity (user or team)", default="your API key's default entity")
    wandb_mode: str | None = option(None, "online, offline or disabled", default="online with an API key, else offline")

    def __post_init__(self) -> None:
        if isinstance(self.runs_dir, os.PathLike):
            self.runs_dir = os.fspath(self.runs_dir)
        for name, types in FIELD_TYPES.items():
            if int in types and isinstance(getattr(self, name), float):
                with contextlib.suppress(ValueError):  # a fraction stays, for validate to refuse
                    setattr(self, name, whole_number(getattr(self, name)))
        with contextlib.suppress(RLHelpersError):  # an unknown env id: validate names it
            game = atari_game(self.env_id) or self.env_id
            self.wandb_project = self.wandb_project or f"{game.lower()}-actor-critic"
        super().__post_init__()

    @property
    def run_name(self) -> str:
        """Run name used for the directory and the W&B run (``format_run_name``)."""
        return format_run_name(arm_name(self.algo, self.variant), self.seed)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON view of the config as runs save it: without ``runs_dir``, since where a run lives is
        not part of what it is (a saved path goes stale when the run moves, and names the machine)."""
        return {name: value for name, value in dataclasses.asdict(self).items() if name != "runs_dir"}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """Rebuild a config from ``to_dict`` output, ignoring keys this version does not know."""
        return cls(**{name: value for name, value in values.items() if name in FIELD_TYPES})


# The types each field of TrainConfig may hold: (int,), or (float, NoneType) for float | None.
FIELD_TYPES = {name: get_args(hint) or (hint,) for name, hint in get_type_hints(TrainConfig).items()}


# Fields that define what a run *is*, its evaluation protocol included: a saved run whose value differs cannot be
# resumed with the new one. total_timesteps, checkpoint cadence, device, paths and W&B settings may change between
# sessions.
IDENTITY_FIELDS = (
    "algo", "variant", "seed", "env_id", *GAME_SETTINGS, "n_envs", "n_steps", "gamma", "lr", "pg_coef",
    "vf_coef", "ent_coef", "max_grad_norm", "rms_alpha", "rms_eps", "hidden_size", "eval_interval", "n_eval_episodes",
    "n_eval_envs",
)

# The values a field of each type accepts (a float field also an int), and how an error names the type.
ACCEPTED = {int: ((int,), "an integer"), float: ((int, float), "a number"), str: ((str,), "text"),
            bool: ((bool,), "True or False")}
# The fields that must be positive, then those that must not be negative (in the order validate checks them).
POSITIVE = ("total_timesteps", "n_envs", "n_steps", "eval_interval", "n_eval_episodes", "n_eval_envs", "hidden_size",
            "keep_checkpoints", "snapshot_interval", "lr", "max_grad_norm", "rms_eps", "checkpoint_interval_s")
NON_NEGATIVE = ("pg_coef", "vf_coef", "ent_coef", "seed", "torch_threads", "env_threads", "env_groups")


def _check_types(config: TrainConfig) -> None:
    """Raise ``RLHelpersError`` for the first field holding a value of another type (papermill's -r passes text)."""
    for name, types in FIELD_TYPES.items():
        value, (accepted, kind) = getattr(config, name), ACCEPTED[types[0]]
        if (value is None and type(None) in types) or (isinstance(value, accepted)
                                                       and isinstance(value, bool) == (types[0] is bool)):
            continue
        papermill = " (papermill's -r passes text: use -p)" if isinstance(value, str) else ""
        raise RLHelpersError(f"{name} must be {kind}, got {value!r}{papermill}")


def check_choice(what: str, value: object, choices: Collection[str], others: str = "") -> None:
    """Raise ``RLHelpersError`` unless ``value`` is one of ``choices``, naming them (and ``others``, words on the
    choices a caller takes besides them)."""
    if value not in choices:
        raise RLHelpersError(f"unknown {what} {value!r}: choose one of {', '.join(choices)}{others}")


def validate(config: TrainConfig) -> TrainConfig:
    """Raise ``RLHelpersError`` naming the first bad value; return the config unchanged otherwise."""
    _check_types(config)
    check_choice("algo", config.algo, ALGORITHMS)
    if config.variant:
        if not VARIANT_PATTERN.match(config.variant):
            raise RLHelpersError(f"variant must be letters and digits, got {config.variant!r}")
        defaults = run_defaults(config.algo, config.env_id)  # what the run would take without the variant
        if all(getattr(config, name) == defaults.get(name) for name in ALGORITHMS[config.algo].defaults):
            raise RLHelpersError(f"variant {config.variant} changes none of {config.algo}'s hyperparameters "
                                 f"({', '.join(ALGORITHMS[config.algo].defaults)}): set the ones it changes, or train "
                                 "without a variant")
    check_supported(config.env_id, config.life_loss, config.fire_reset)
    for name in POSITIVE + NON_NEGATIVE:
        value, positive = getattr(config, name), name in POSITIVE
        if (not value > 0) if positive else value < 0:  # NaN is not positive
            sign = "positive" if positive else "non-negative"
            what = f"a {sign} integer" if int in FIELD_TYPES[name] else sign
            raise RLHelpersError(f"{name} must be {what}, got {value!r}")
    n_envs, eval_interval = config.n_envs, config.eval_interval
    assert n_envs is not None and eval_interval is not None  # the run's defaults, set by __post_init__
    if config.env_groups > n_envs:
        raise RLHelpersError(f"env_groups must be at most n_envs ({config.n_envs}), got {config.env_groups!r}")
    if not 0.0 <= config.gamma <= 1.0:
        raise RLHelpersError(f"gamma must lie in [0, 1], got {config.gamma!r}")
    if not 0.0 < config.rms_alpha < 1.0:
        raise RLHelpersError(f"rms_alpha must lie in (0, 1), got {config.rms_alpha!r}")
    n_evals = config.total_timesteps // eval_interval + 2
    if (config.seed + config.total_timesteps + n_envs > EVAL_SEED_OFFSET
            or config.seed + n_evals * config.n_eval_envs >= EVAL_SEED_OFFSET):
        raise RLHelpersError(f"seed + total_timesteps is too large for the environments' int32 seeds "
                             f"(at most {EVAL_SEED_OFFSET:,} together)")
    if config.wandb_mode is not None:
        check_choice("wandb_mode", config.wandb_mode, ("online", "offline", "disabled"))
    if config.device != "auto" and not config.device.startswith(("cpu", "cuda", "mps")):
        raise RLHelpersError(f"unknown device {config.device!r}: use auto, cpu, cuda or mps")
    return config


def config_differences(saved: TrainConfig, requested: TrainConfig, precision: str = "fp32") -> list[str]:
    """Identity fields on which a saved run's config and the requested one disagree, as ``name: a != b``, and a saved
    ``precision`` other than fp32 (earlier versions could train the encoder in bfloat16)."""
    had, wanted = saved.to_dict(), requested.to_dict()
    differences = [f"{name}: saved {had[name]!r} != requested {wanted[name]!r}"
                   for name in IDENTITY_FIELDS if had[name] != wanted[name]]
    if precision != "fp32":
        differences.append(f"precision: saved {precision!r}, while this version trains in fp32 only")
    return differences
