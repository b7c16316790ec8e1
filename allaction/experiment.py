"""The report's experiments, each written once: its game and run settings, what it compares, its stop return and
milestones, the predictions of its follow-up sections with the seeds and steps they are judged on, and the names of
the figures and measurements it commits. The core and the run machinery hold no fact of them; the notebook and the
command line take them from here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.losses import ALGORITHMS
from rlhelpers.runner.campaign import CampaignRun, campaign_runs
from rlhelpers.runner.config import DEFAULT_RUNS_DIR, arm_name, check_choice

# Named changes of an algorithm's hyperparameters, for controlled experiments beside the report's runs.
# A variant is part of the run's name (``task1-pg1_seed-0``) and of its identity; its values are the
# defaults of the run, and an explicit value that contradicts them is refused.
VARIANTS: dict[str, dict[str, float]] = {
    "pg1": {"pg_coef": 1.0},  # A2C's actor weight: does task1's small actor step explain its slower learning?
    # All of A2C's coefficients and its learning rate: at equal hyperparameters, is the all-action method slower?
    "a2chp": dict(ALGORITHMS["a2c"].defaults),
    # A2C's actor weight at task1's temperature ent_coef / pg_coef (0.01): the step without pg1's colder policy.
    "pg1ent": {"pg_coef": 1.0, "ent_coef": 0.01},
    # task1's learning rate and critic weight for A2C: step size or estimator, which made pg1ent fast?
    "lrvf": {"lr": 1.5e-3, "vf_coef": 0.5},
}


def _changes_algo(variant: str, algo: str) -> bool:
    return any(ALGORITHMS[algo].defaults.get(name) != value for name, value in VARIANTS[variant].items())


# The study's arms: every algorithm, and every algorithm with a variant that changes it (task1-pg1).
ARMS = tuple(ALGORITHMS) + tuple(arm_name(algo, variant) for variant in VARIANTS for algo in ALGORITHMS
                                 if _changes_algo(variant, algo))


def variant_options(algo: str, variant: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The run options (``TrainConfig`` fields) of ``algo`` with ``variant`` ("" for none): ``options`` with the
    variant's hyperparameters. A variant the study lacks, one that changes nothing for ``algo``, and an option
    that contradicts the variant are refused with an ``RLHelpersError``."""
    if not variant:
        return dict(options)
    check_choice("variant", variant, VARIANTS)
    if not _changes_algo(variant, algo):
        raise RLHelpersError(f"variant {variant} changes nothing for {algo}: train it without one")
    contradicted = [f"{name} {value:g}, got {options[name]!r}" for name, value in VARIANTS[variant].items()
                    if options.get(name) not in (None, value)]
    if contradicted:
        raise RLHelpersError(f"variant {variant} means {'; '.join(contradicted)}")
    return {**options, **VARIANTS[variant], "variant": variant}


def study_runs(arms: tuple[str, ...], seeds: tuple[int, ...],
               options: Mapping[str, Any] | None = None) -> list[CampaignRun]:
    """``campaign_runs`` of the study's ``arms`` (``ARMS``), each variant's runs with its hyperparameters; a shared
    option of ``options`` that contradicts an arm's variant is refused (``variant_options``)."""
    changes = {}
    for arm in arms:
        check_choice("arm", arm, ARMS)
        algo, _, variant = arm.partition("-")
        if variant:
            variant_options(algo, variant, options or {})
            changes[arm] = VARIANTS[variant]
    return campaign_runs(arms, seeds, changes)


# The report's files in a runs directory's figures_dir (``plotting.figures_dir``); a follow-up section's figure and
# measurements are its ``Comparison``'s.
COMPARISON_PNG = "comparison.png"  # the Pong experiment's runs
ABLATION_PNG = "ablation.png"  # the five-seed arms' curves
DIAGNOSTICS_PNG = "diagnostics.png"
MECHANISM_PNG = "mechanism.png"
LEDGER_PNG = "ledger.png"  # every prediction's Δ with its interval, a panel per game
ANALYSIS_JSON = "analysis.json"  # the gradient facts of the Pong experiment's runs
AGENT_GIF = "agent.gif"


@dataclass(frozen=True)
class Experiment:
    """One experiment: runs of ``arms`` x ``seeds`` on ``env_id`` with the run ``settings`` they share, committed
    in ``runs_dir``. A run stops once an evaluation's mean return exceeds ``stop_return`` (None: no early stop); the
    results table shows the first step above each of ``milestones`` (and the stop return)."""

    env_id: str
    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    runs_dir: str
    stop_return: float | None = None
    milestones: tuple[float, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)

    def options(self) -> dict[str, Any]:
        """The run options every run of the experiment shares (``TrainConfig`` fields)."""
        return {"env_id": self.env_id, "stop_return": self.stop_return, **self.settings}

    @property
    def levels(self) -> tuple[float, ...]:
        """The returns whose first passing the results table shows: the milestones, then the stop return."""
        return (*self.milestones, *(() if self.stop_return is None else (self.stop_return,)))


HOLDS, REFUTED, NOT_SHOWN = "holds", "refuted", "not shown"  # a prediction's verdict


@dataclass(frozen=True)
class Prediction:
    """Prediction ``number`` of the report, on Δ(x, y)'s interval: it lies entirely above 0 (``above``), or does not
    (not ``above``: x is not faster than y); or, given ``below``, it lies entirely below that bound."""

    number: int
    x: str
    y: str
    above: bool = True
    below: float | None = None

    def verdict(self, low: float, high: float) -> str:
        """The verdict on the interval [``low``, ``high``]: ``HOLDS`` where it lies entirely on the side of the bound
        that the prediction names, ``REFUTED`` only where it lies entirely on the other side, ``NOT_SHOWN`` where it
        straddles the bound. "Not entirely above 0" holds unless the interval lies entirely above 0."""
        if not self.above:
            return REFUTED if low > 0 else HOLDS
        if self.below is not None:
            return HOLDS if high < self.below else REFUTED if low > self.below else NOT_SHOWN
        return HOLDS if low > 0 else REFUTED if high < 0 else NOT_SHOWN

    @property
    def key(self) -> str:
        return f"{self.x}/{self.y}"


@dataclass(frozen=True)
class Comparison:
    """A follow-up section's test, fixed before its runs: its ``predictions``, the ``seeds`` of each arm, the
    first and last evaluation step (``window``) that each seed's score S averages, the experiment's stop return
    (the section counts the seeds above it), and the names of its figure and of its gradient measurements."""

    predictions: tuple[Prediction, ...]
    seeds: tuple[int, ...]
    window: tuple[int, int]
    stop_return: float | None = None
    figure: str = ""
    analysis: str = ""

    @property
    def arms(self) -> tuple[str, ...]:
        """The arms that the predictions compare, in the order they first name them."""
        return tuple(dict.fromkeys(arm for p in self.predictions for arm in (p.x, p.y)))


# Pong: A2C against the two all-action variants, seeds 0 and 100; a run stops once it passes 18 ("solved"). The
# table's milestones: leaving the -21..-20 plateau, then winning more points than losing.
PONG = Experiment("PongNoFrameskip-v4", ("a2c", "task1", "task2"), (0, 100), DEFAULT_RUNS_DIR, stop_return=18.0,
                  milestones=(-10.0, 0.0))
FIVE_SEEDS = (0, 100, 200, 300, 400)  # the follow-ups' seeds: the report's two and three more, 100 apart
SCORE_WINDOW = (0, 7_200_000)  # S: every evaluation up to the last step every report run reaches (a2c_seed-0's stop)
# The five-seed section's predictions: A2C faster than task1; task1 with pg_coef 1.0 (A2C's actor weight) faster than
# task1; task1 with pg_coef 1.0 not slower than A2C.
ABLATION = Comparison((Prediction(1, "a2c", "task1", True), Prediction(2, "task1-pg1", "task1", True),
                       Prediction(3, "a2c", "task1-pg1", False)), FIVE_SEEDS, SCORE_WINDOW, PONG.stop_return,
                      "seeds.png", "analysis_seeds.json")
# The equal-hyperparameters section's: task1 at A2C's lr and coefficients (the variant a2chp) is not slower than
# A2C, and is faster than task1 at the course's hyperparameters.
EQUAL_HP = Comparison((Prediction(4, "a2c", "task1-a2chp", False), Prediction(5, "task1-a2chp", "task1", True)),
                      FIVE_SEEDS, SCORE_WINDOW, PONG.stop_return, "equal_hp.png")

# Breakout, the second game, as its published A2C runs train it: a lost life ends a training episode, FIRE after
# every reset and lost life, no early stop, evaluations every 500k steps. Its predictions 8-10 are the Pong
# answers asked again, on three seeds, S over the 20 evaluations from 0.5M to 10M.
BREAKOUT = Experiment("BreakoutNoFrameskip-v4", ("a2c", "task1", "task1-pg1"), (0, 100, 200),
                      f"{DEFAULT_RUNS_DIR}/breakout",
                      settings={"life_loss": True, "fire_reset": True, "eval_interval": 500_000})
BREAKOUT_TEST = Comparison((Prediction(8, "a2c", "task1", True), Prediction(9, "task1-pg1", "task1", True),
                            Prediction(10, "a2c", "task1-pg1", False)), BREAKOUT.seeds, (500_000, 10_000_000),
                           figure="breakout.png", analysis="analysis_breakout.json")
BREAKOUT_LEARNS = 30.0  # prediction 7: A2C's seed-averaged evaluation return at 10M is at least this

# The hub arm pg1ent, task1 with pg_coef 1.0 and ent_coef 0.01 (A2C's actor weight at task1's temperature), on both
# games: each of its predictions changes one setting or one pair against an arm the report has. On Pong: the step
# (against task1), the temperature (task1-pg1) and the learning rate with the critic weight (task1-a2chp).
PG1ENT_PONG = Comparison((Prediction(11, "task1-pg1ent", "task1"), Prediction(13, "task1-pg1", "task1-pg1ent"),
                          Prediction(14, "task1-pg1ent", "task1-a2chp")), FIVE_SEEDS, SCORE_WINDOW, PONG.stop_return,
                         "pg1ent.png")
# On Breakout: the step, and keeping pace with A2C (the upper end of the interval below a fifth of A2C's mean S).
PG1ENT_BREAKOUT = Comparison((Prediction(12, "task1-pg1ent", "task1"),
                              Prediction(16, "a2c", "task1-pg1ent", below=22.0)),
                             BREAKOUT.seeds, BREAKOUT_TEST.window, figure="breakout_pg1ent.png")
# The missing cell of Pong's 2x2 (estimator x lr and vf_coef): A2C at task1's lr and vf_coef (the variant lrvf).
# Its step beats A2C's; the all-action estimator accounts for less than half of pg1ent's lead over A2C (the upper end of
# the interval below half of Δ(task1-pg1ent, a2c) = 9.1); and at least ``LRVF_PASSED`` of its 5 seeds pass 18.
LRVF_PONG = Comparison((Prediction(17, "a2c-lrvf", "a2c"), Prediction(18, "task1-pg1ent", "a2c-lrvf", below=4.5)),
                       FIVE_SEEDS, SCORE_WINDOW, PONG.stop_return, "lrvf.png")
LRVF_PASSED = 4  # prediction 19
# Pong's 2x2 around the missing cell, read both ways beside predictions 17-19: a row per actor estimator, a column per
# lr and vf_coef, each arm with the section of ``claims.measure`` whose seed scores S it takes.
ESTIMATORS = ("A2C's sampled-action actor, V critic", "all-action actor, Q critic (pg 1, ent 0.01)")
STEP_SETTINGS = ("A2C's lr 7e-4, vf_coef 0.25", "task1's lr 1.5e-3, vf_coef 0.5")
TWO_BY_TWO = ((("seeds/", "a2c"), ("lrvf/", "a2c-lrvf")), (("equal_hp/", "task1-a2chp"), ("pg1ent/", "task1-pg1ent")))
COLLAPSED_ENTROPY = 0.01  # prediction 15: a window whose training entropy is below this is a collapsed policy
MAX_COLLAPSED_SHARE = 0.01  # prediction 15: at most this share of pg1ent's Breakout windows

# SpaceInvaders, the third game, against a course's own bar: A2C at the report's hyperparameters, a lost life ending
# a training episode (the game needs no FIRE: its invaders advance and shoot without one), no early stop, evaluations
# every 500k steps. The course grades ``reward_mean_100``: each env's mean score over its last 100 training games, then
# the mean over the envs (the metrics line's ``charts/reward_mean_100``, recomputable from games.jsonl).
SPACE_INVADERS = Experiment("SpaceInvadersNoFrameskip-v4", ("a2c",), (0, 100), f"{DEFAULT_RUNS_DIR}/spaceinvaders",
                            settings={"life_loss": True, "eval_interval": 500_000})

COURSE_GOOD, COURSE_FULL_MARK = 400.0, 600.0  # the course's bar on reward_mean_100 at 10M; prediction 20: both seeds
# A2C at 10M steps in rl-baselines3-zoo's benchmark.md: one agent's mean game score, stochastic policy, 162 games.
PUBLISHED_SPACE_INVADERS = (627.2, "rl-baselines3-zoo")
SPACE_INVADERS_FIGURE = "spaceinvaders.png"

EXPERIMENTS = {"pong": PONG, "breakout": BREAKOUT, "spaceinvaders": SPACE_INVADERS}


def experiment_of(env_id: str) -> Experiment | None:
    """The report's experiment on ``env_id``, None for a game it has none of."""
    return next((e for e in EXPERIMENTS.values() if e.env_id == env_id), None)
