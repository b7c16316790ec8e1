"""Every figure that the report's written analysis cites, recomputed from the runs present.

The analysis is prose in the notebook. Next to it, a list of ``Claim``s repeats each figure as the
prose writes it and names the measurement behind it (a key of ``measure``); ``check`` measures them all
again from the runs' evaluation histories and the gradient analysis (``figures/analysis.json``) and says,
claim by claim, whether the text still holds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import permutations, product
from pathlib import Path
from typing import Any

from allaction.experiment import (
    ABLATION,
    BREAKOUT,
    BREAKOUT_LEARNS,
    BREAKOUT_TEST,
    COLLAPSED_ENTROPY,
    COURSE_FULL_MARK,
    EQUAL_HP,
    LRVF_PASSED,
    LRVF_PONG,
    MAX_COLLAPSED_SHARE,
    PG1ENT_BREAKOUT,
    PG1ENT_PONG,
    PONG,
    SPACE_INVADERS,
    TWO_BY_TWO,
)
from allaction.games import training_score
from allaction.results import markdown_table
from allaction.seeds import NO_RUNS, difference, gap_share, measure_arms, span
from rlhelpers.plots import arm_curve, last_evaluation, mean_of_means, runs_by_arm
from rlhelpers.runner.config import format_run_name, parse_run_name
from rlhelpers.runner.store import RunRecord, read_run, read_runs

# Each follow-up section's test on Pong and on Breakout, under the prefix of its figures in ``measure``.
PONG_SECTIONS = (("seeds/", ABLATION), ("equal_hp/", EQUAL_HP), ("pg1ent/", PG1ENT_PONG), ("lrvf/", LRVF_PONG))
BREAKOUT_SECTIONS = (("breakout/", BREAKOUT_TEST), ("breakout/", PG1ENT_BREAKOUT))
# Every arm that a five-seed section compares.
FIVE_SEED_ARMS = tuple(dict.fromkeys(arm for _, comparison in PONG_SECTIONS for arm in comparison.arms))
SIGNIFICANT = "sig"  # two significant digits at any scale: 0.0054, 0.13, 3.4, 38
NOT_REACHED = "not reached"  # what a run measures of a return it never passed
STEP = "M"  # environment steps in millions: 7.2M
ENTROPY = "losses/entropy"  # the policy entropy in a run's metrics.jsonl
NO_ANALYSIS = "n/a"  # what a gradient fact measures without a gradient analysis
# What a claim measures when it cannot be checked here, and why.
UNCHECKED = {NO_RUNS: ("lacks its runs", "lack their runs"),
             NO_ANALYSIS: ("lacks a gradient analysis", "lack a gradient analysis")}  # said of one, of several


@dataclass(frozen=True)
class Claim:
    """One figure of the prose: what it says, the figure as the text writes it, the measurement behind it
    (a ``measure`` key) and how the text rounds it (a format spec, ``SIGNIFICANT``, ``STEP``)."""

    says: str
    figure: str
    key: str
    fmt: str = ".1f"


def format_figure(value: Any, fmt: str) -> str:
    """``value`` as the text writes it: rounded by ``fmt``, a range as "low–high" (or "low to high" from below 0)."""
    if value is None:
        return NO_ANALYSIS
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, tuple):
        low, high = (format_figure(v, fmt) for v in value)
        return low if low == high else f"{low} to {high}" if value[0] < 0 else f"{low}–{high}"
    if fmt == STEP:
        return f"{value / 1e6:.1f}M"
    if fmt == SIGNIFICANT:
        decimals = 0 if value == 0 or not math.isfinite(value) else max(0, 1 - math.floor(math.log10(abs(value))))
        return f"{value:.{decimals}f}"
    return format(value, fmt)


def compare_speed(records: Iterable[RunRecord], arms: Iterable[str]) -> dict[str, Any]:
    """The report's speed comparison of ``arms``: ``until``, the last step that every compared curve
    reaches; ``seed/<run>``, each seed's mean return up to it; ``below/<arm>/<other>``, whether both of the
    arm's seeds lie below both of the other's (the report's rule for "learned more slowly"). Empty unless
    every arm has a run with evaluations."""
    runs = runs_by_arm(records, arms)
    curves = {arm: arm_curve(records) for arm, records in runs.items() if records}
    if len(curves) < len(runs):
        return {}
    until = int(min(curve.steps[-1] for curve in curves.values()))
    found: dict[str, Any] = {"until": until}
    for arm, curve in curves.items():
        steps = curve.steps[curve.steps <= until].tolist()
        found.update({f"seed/{r.name}": mean_of_means(r, steps) for r in runs[arm]})
    seed_means = {arm: [found[f"seed/{r.name}"] for r in records] for arm, records in runs.items()}
    found.update({f"below/{a}/{b}": max(seed_means[a]) < min(seed_means[b]) for a, b in permutations(curves, 2)})
    return found


def _head_actor_ratio(head_actor: dict[tuple[str, int, int], float], a: str, b: str) -> tuple[float, float] | None:
    """Range of arm ``a``'s actor-term gradient on the policy head over arm ``b``'s, same seed and step."""
    return span(value / head_actor[(b, seed, step)] for (arm, seed, step), value in head_actor.items()
                 if arm == a and head_actor.get((b, seed, step)))


def _gradient_facts(analysis: dict[str, Any] | None) -> dict[str, Any]:
    named = [(*parse_run_name(s["run"]), s) for s in (analysis or {}).get("snapshots", {}).values()]
    trained = [(arm, seed, s) for arm, seed, s in named if s["step"] > 0]
    arms = {arm for arm, _, _ in trained}
    head_actor = {(arm, seed, s["step"]): s["loss_term_gradients"]["actor"]["policy_head"]
                  for arm, seed, s in trained}
    agreement = [s["task_gradient_agreement"] for arm, _, s in named
                 if arm in PONG.arms and "task_gradient_agreement" in s]
    found: dict[str, Any] = {
        **{f"agreement_f{bits}": max((a[f"float{bits}"]["relative_difference"] for a in agreement), default=None)
           for bits in (32, 64)},
        "variance_ratio": span(s["estimator_variance"]["sampled_over_all_action_batch"] for arm, _, s in trained
                               if arm in PONG.arms and "estimator_variance" in s),
        **{f"head_actor/{a}/{b}": _head_actor_ratio(head_actor, a, b) for a, b in permutations(FIVE_SEED_ARMS, 2)},
        **{f"advantage/{arm}": span(s["advantage_scale"]["advantage_rms"] for run_arm, _, s in trained
                                    if run_arm == arm) for arm in arms},
        **{f"analysed/{arm}": len({s["run"] for run_arm, _, s in trained if run_arm == arm}) for arm in arms},
        "error_over_spread": span(s["advantage_scale"]["critic_rms_error"] / s["advantage_scale"]["advantage_rms"]
                                  for arm, _, s in trained if arm == "task1"),
    }
    for algo in ("a2c", "task1"):
        found[f"encoder_critic_over_actor/{algo}"] = span(
            s["loss_term_gradients"]["critic"]["encoder"] / s["loss_term_gradients"]["actor"]["encoder"]
            for arm, _, s in trained if arm == algo)
        shares = [regime["groups"]["policy_head"]["below_eps_share"] for run, regime
                  in (analysis or {}).get("optimizer_regime", {}).items() if parse_run_name(run)[0] == algo]
        found[f"eps_share/{algo}"] = min(shares, default=None)
    return found


def merged_analysis(*analyses: dict[str, Any] | None) -> dict[str, Any] | None:
    """One analysis of the snapshots and optimizer regimes of all ``analyses`` (None ones left out), which must
    share one method and its settings; None when none is given."""
    given = [a for a in analyses if a is not None]
    if not given:
        return None
    settings = [{key: value for key, value in a.items() if not isinstance(value, dict)} for a in given]
    if any(s != settings[0] for s in settings):
        raise ValueError(f"the analyses were measured with different settings: {settings}")
    return {**settings[0], "snapshots": {k: v for a in given for k, v in a.get("snapshots", {}).items()},
            "optimizer_regime": {k: v for a in given for k, v in a.get("optimizer_regime", {}).items()}}


def measure(runs_dir: str | Path, analysis: dict[str, Any] | None, seeds_analysis: dict[str, Any] | None = None,
            breakout_dir: str | Path | None = None, breakout_analysis: dict[str, Any] | None = None,
            spaceinvaders_dir: str | Path | None = None) -> dict[str, Any]:
    """Every measurement the report's claims can name, by key, from the Pong experiment's runs in ``runs_dir``
    and their gradient ``analysis`` (and, given ``breakout_dir``, the second game's):

    - ``pass/<run>``: the first evaluation step above the stop return (``NOT_REACHED``); ``last/<run>``: the last
      evaluation's mean return;
    - ``until``, ``seed/<run>``, ``below/<arm>/<other>``: ``compare_speed`` of the algorithms;
    - gradient facts, as ``(low, high)`` ranges over the trained snapshots (step 0 left out) or extremes:
      ``agreement_f32``/``agreement_f64`` (largest relative difference of task1's and task2's actor
      gradients), ``variance_ratio``, ``head_actor/<a>/<b>`` (for two arms of ``FIVE_SEED_ARMS``: a's actor-term
      gradient on the policy head over b's, same seed and step), ``advantage/<arm>`` (the size of the
      advantage its actor follows; a variant's too), ``error_over_spread`` (task1's critic error over its
      action spread), ``encoder_critic_over_actor/<algo>``, ``eps_share/<algo>`` (share of policy-head
      parameters whose RMSprop mean square is below epsilon), ``analysed/<arm>`` (how many runs of the arm
      have a trained snapshot) and ``lr_ratio`` (task1's learning rate over A2C's);
    - ``budget``: the report runs' training budget, when they share one;
    - ``ablation/...``: ``compare_speed`` of the ablation's arms (``ablation/until``,
      ``ablation/below/<a>/<b>``, ...);
    - ``seeds/...``: the five-seed section's figures, ``measure_seeds`` of the runs of all five seeds
      (``seeds/passed/<arm>``, ``seeds/interval/<x>/<y>``, ...), and given the five-seed runs' gradient
      analysis ``seeds_analysis``, the gradient facts over the snapshots of both analyses
      (``seeds/variance_ratio``, ``seeds/analysed/<arm>``, ...);
    - ``equal_hp/...``: the equal-hyperparameters section's, ``measure_seeds`` of ``EQUAL_HP``;
    - ``pg1ent/...``: the hub arm's Pong section's, ``measure_seeds`` of ``PG1ENT_PONG``; ``prediction/<n>``, the
      verdicts of the predictions without a Δ (``_verdicts``), and the figures put beside them (``_beside``);
    - ``breakout/...``: the second game's section, ``measure_seeds`` of ``BREAKOUT_TEST`` on the runs in
      ``breakout_dir``, ``breakout/learns`` (prediction 7: A2C's seed-averaged last evaluation is at least
      ``BREAKOUT_LEARNS``, judged once all its seeds have finished), ``breakout/last/<run>``,
      ``breakout/entropy_floor/<arm>`` (each seed's lowest logged policy entropy, over the seeds) and the gradient
      facts of ``breakout_analysis``
      (``breakout/advantage/<arm>``, ``breakout/head_actor/<a>/<b>``, ...);
    - ``lrvf/...``: the missing cell's section, ``measure_seeds`` of ``LRVF_PONG``, and beside it the four Δs of
      ``TWO_BY_TWO`` (``_beside``) and the range over each of its arms' seeds of the lowest policy entropy each logged
      (``lrvf/entropy_floor/<arm>``);
    - ``spaceinvaders/...``: the third game's runs in ``spaceinvaders_dir`` (``_third_game``).

    Apart from ``head_actor/...`` and a variant's ``advantage/...``, the gradient facts are the report runs':
    a variant's snapshots (the ablation's) are measured beside them, not pooled in. A measurement with
    nothing behind it is missing or None, and its claims do not hold: one whose runs are missing reads "no runs"
    in the check, one whose analysis is missing "n/a".
    """
    every_run = read_runs(runs_dir)  # read once: the report's seeds and each five-seed section's
    records = [record for record in every_run if record.seed in PONG.seeds]
    evaluated = [record for record in records if record.evaluations]
    assert PONG.stop_return is not None  # Pong's runs stop at 18
    parts: list[tuple[str, dict[str, Any]]]
    parts = [("pass/", {r.name: NOT_REACHED if (step := r.first_step_above(PONG.stop_return)) is None else step
                        for r in evaluated}),
             ("last/", {r.name: last_evaluation(r).mean for r in evaluated}),
             ("", compare_speed(records, PONG.arms)),
             ("ablation/", compare_speed(records, ABLATION.arms)),
             ("", _gradient_facts(analysis)),
             *((prefix, measure_arms(runs_by_arm((r for r in every_run if r.seed in comparison.seeds),
                                                 comparison.arms), comparison))
               for prefix, comparison in PONG_SECTIONS)]
    if seeds_analysis is not None:
        parts.append(("seeds/", _gradient_facts(merged_analysis(analysis, seeds_analysis))))
    if breakout_dir is not None:
        parts += [("breakout/", _second_game(breakout_dir)), ("breakout/", _gradient_facts(breakout_analysis))]
    if spaceinvaders_dir is not None:
        parts.append(("spaceinvaders/", _third_game(spaceinvaders_dir)))
    found = {prefix + key: value for prefix, part in parts for key, value in part.items()}
    # the report runs' budget: a run with a variant is the ablation's (one saved before variants existed has none)
    budgets = {record.config.total_timesteps for record in records if not record.config.variant}
    found["budget"] = budgets.pop() if len(budgets) == 1 else None
    for _, arm in (cell for row in TWO_BY_TWO for cell in row):  # beside predictions 17-19: each arm's entropy floor
        found[f"lrvf/entropy_floor/{arm}"] = span(min(logged) for r in every_run if r.arm == arm
                                                  and r.seed in LRVF_PONG.seeds and (logged := _entropies(r)))
    lr = {record.arm: record.config.lr for record in records}
    found["lr_ratio"] = task1 / a2c if (task1 := lr.get("task1")) and (a2c := lr.get("a2c")) else None
    return {**found, **_verdicts(found), **_beside(found)}


def _verdicts(found: dict[str, Any]) -> dict[str, bool | None]:
    """The verdicts of the predictions without a Δ, once their runs are complete (None before), as
    ``prediction/<number>``: the ablation's first (0: task1-pg1 neither slower than A2C nor as slow as task1, on two
    seeds), 6 (at least 4 of task1-a2chp's 5 seeds pass 18), 7 (A2C learns Breakout), 15 (at most
    ``MAX_COLLAPSED_SHARE`` of pg1ent's Breakout windows below ``COLLAPSED_ENTROPY``), 19 (at least ``LRVF_PASSED`` of
    a2c-lrvf's 5 seeds pass 18) and 20 (both SpaceInvaders seeds at ``COURSE_FULL_MARK`` or above at 10M)."""
    below = [found.get(f"ablation/below/{a}/{b}") for a, b in (("task1-pg1", "a2c"), ("task1", "task1-pg1"))]
    passed, training = found["equal_hp/passed/task1-a2chp"], found["equal_hp/training/task1-a2chp"]
    scored, left, collapsed = (found.get(f"breakout/{key}/task1-pg1ent") for key in ("scored", "training", "collapsed"))
    complete = scored == len(BREAKOUT.seeds) and left == 0
    lrvf = {key: found[f"lrvf/{key}/a2c-lrvf"] for key in ("scored", "training", "passed")}  # "no runs" without any
    course = found.get("spaceinvaders/reward_mean_100")
    return {"prediction/0": None if None in below else not below[0] and below[1],
            "prediction/6": passed >= 4 if training == 0 else None,
            "prediction/7": found.get("breakout/learns"),
            "prediction/15": collapsed <= MAX_COLLAPSED_SHARE if complete and collapsed is not None else None,
            "prediction/19": (lrvf["passed"] >= LRVF_PASSED if lrvf["scored"] == len(LRVF_PONG.seeds)
                              and lrvf["training"] == 0 else None),
            "prediction/20": None if course is None else course[0] >= COURSE_FULL_MARK}


def seed_scores(found: dict[str, Any], prefix: str, arm: str) -> list[float]:
    """The seed scores S that ``arm`` has so far in a section's figures (``prefix``)."""
    return [value for key, value in found.items() if key.startswith(f"{prefix}score/{arm}_seed-") and value is not None]


def _beside(found: dict[str, Any]) -> dict[str, Any]:
    """What the hub arm's predictions put beside them, not judged, once its arms have all their seeds:
    ``pg1ent/gap_share`` (on Pong the share of task1-pg1's lead over task1-a2chp that the temperature accounts for,
    Δ(task1-pg1, task1-pg1ent) / Δ(task1-pg1, task1-a2chp)) with ``pg1ent/gap_share_interval`` (its interval:
    ``seeds.gap_share``), on Pong Δ(task1-pg1ent, a2c) (post hoc, S as in the five-seed section: ``pg1ent/delta/...``),
    on Breakout Δ(task1-pg1ent, task1-pg1) as a section's differences are measured (``breakout/delta/...``), and the
    four Δs of Pong's ``TWO_BY_TWO`` (``lrvf/delta/...``): the setting's effect on each estimator, then the
    estimator's at each setting."""
    pong = [seed_scores(found, "pg1ent/", arm) for arm in ("task1-pg1", "task1-pg1ent", "task1-a2chp")]
    beside: dict[str, Any] = {}
    if all(len(scores) == len(PG1ENT_PONG.seeds) for scores in pong):
        share, low, high = gap_share(pong[0], pong[1], pong[2])
        beside.update({"pg1ent/gap_share": share, "pg1ent/gap_share_interval": (low, high)})
    # where the figures go; x and y, each as (the section whose seed scores it takes, the arm); the seeds each needs
    pairs = [("pg1ent/", ("pg1ent/", "task1-pg1ent"), ("seeds/", "a2c"), PG1ENT_PONG.seeds),
             ("breakout/", ("breakout/", "task1-pg1ent"), ("breakout/", "task1-pg1"), BREAKOUT.seeds)]
    (a, b), (c, d) = TWO_BY_TWO
    pairs += [("lrvf/", x, y, LRVF_PONG.seeds) for x, y in ((b, a), (d, c), (c, a), (d, b))]
    for prefix, x, y, seeds in pairs:
        xs, ys = seed_scores(found, *x), seed_scores(found, *y)
        if len(xs) == len(ys) == len(seeds):
            beside.update({prefix + key: value for key, value in difference(xs, ys).keys(f"{x[1]}/{y[1]}").items()})
    return beside


def _second_game(runs_dir: str | Path) -> dict[str, Any]:
    """``measure_arms`` of the second game's tests (``BREAKOUT_SECTIONS``), whether A2C learned it (None until its
    seeds finish), each run's last evaluation mean (``last/<run>``) and, per arm, the range over its seeds of the
    lowest policy entropy each logged (``entropy_floor/<arm>``: near 0, a policy that has become almost
    deterministic), its windows (lines of training metrics) with an entropy (``windows/<arm>``) and the share of those
    below ``COLLAPSED_ENTROPY`` (``collapsed/<arm>``; None without any)."""
    arms = tuple(dict.fromkeys(arm for _, comparison in BREAKOUT_SECTIONS for arm in comparison.arms))
    runs = runs_by_arm(read_runs(runs_dir, BREAKOUT.seeds), arms)  # read once, for the figures and the entropies
    found = {key: value for _, comparison in BREAKOUT_SECTIONS for key, value in measure_arms(runs, comparison).items()}
    finished = found["scored/a2c"] == len(BREAKOUT.seeds) and found["training/a2c"] == 0
    found["learns"] = found["last/a2c"] >= BREAKOUT_LEARNS if finished else None
    for arm, records in runs.items():
        found.update({f"last/{record.name}": last_evaluation(record).mean for record in records})
        entropies = [_entropies(record) for record in records]
        found[f"entropy_floor/{arm}"] = span(min(logged) for logged in entropies if logged)
        windows = [entropy for logged in entropies for entropy in logged]
        found[f"windows/{arm}"] = len(windows)
        found[f"collapsed/{arm}"] = sum(e < COLLAPSED_ENTROPY for e in windows) / len(windows) if windows else None
    return found


def _entropies(record: RunRecord) -> list[float]:
    """The policy entropies that a run logged, in order."""
    return [value for m in record.metrics() if (value := m.values.get(ENTROPY)) is not None]


def _third_game(runs_dir: str | Path) -> dict[str, Any]:
    """SpaceInvaders' runs (None for one not there yet): each run's training score at its last logged games
    (``reward_mean_100/<run>``, by env as the course grades it, and ``pooled/<run>``, the last 100 games of all envs)
    and its last evaluation (``last/<run>``); ``reward_mean_100``, the seeds' lowest and highest, once all have
    finished (None before)."""
    found: dict[str, Any] = {"reward_mean_100": None}
    finished: list[float] = []
    for arm, seed in product(SPACE_INVADERS.arms, SPACE_INVADERS.seeds):
        name = format_run_name(arm, seed)
        record = read_run(Path(runs_dir) / name)
        score = training_score(record) if record is not None else None
        found.update({f"reward_mean_100/{name}": score and score.reward_mean_100,
                      f"pooled/{name}": score and score.pooled,
                      f"last/{name}": last_evaluation(record).mean if record and record.evaluations else None})
        if score is not None and record is not None and record.finished():
            finished.append(score.reward_mean_100)
    if len(finished) == len(SPACE_INVADERS.arms) * len(SPACE_INVADERS.seeds):
        found["reward_mean_100"] = span(finished)
    return found


def check(claims: Iterable[Claim], measured: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """Per claim: what it says, its figure in the text, the figure measured now (rounded as the text
    rounds it) and whether the two agree."""
    rows = []
    for claim in claims:
        now = format_figure(measured.get(claim.key, NO_RUNS), claim.fmt)
        rows.append((claim.says, claim.figure, now, now == claim.figure))
    return rows


def verdict_markdown(rows: list[tuple[str, str, str, bool]], runs_dir: str | Path) -> str:
    """The claims check of the runs in ``runs_dir`` in a line for the report's body: how many figures it checked
    and how many of those hold, naming those that do not, then how many it could not check here and why (no runs,
    no gradient analysis): a figure it could not measure is never called wrong."""
    unchecked = {why: sum(now == mark for *_, now, _ in rows) for mark, why in UNCHECKED.items()}
    failing = [f"*{says}* (text: {figure}; measured: {now})" for says, figure, now, holds in rows
               if not holds and now not in UNCHECKED]
    checked = len(rows) - sum(unchecked.values())
    why = ", ".join(f"{n} {reason[0] if n == 1 else reason[1]}" for reason, n in unchecked.items() if n)
    if checked == 0:
        return f"**None of the text's {len(rows)} figures could be checked on the runs in `{runs_dir}`**: {why}."
    verdict = f"**{checked - len(failing)} of the {checked} figures checked hold on the runs in `{runs_dir}`"
    verdict += (f"**: every figure the text cites ({len(rows)})." if checked == len(rows) else
                f".** {len(rows) - checked} of the text's {len(rows)} could not be checked here: {why}.")
    return verdict + (f" Not holding: {'; '.join(failing)}." if failing else "")


def reproduction_markdown(rows: list[tuple[str, str, str, bool]], runs_dir: str | Path) -> str:
    """Which of the text's figures the runs of ``runs_dir`` reproduce (the claims ``check``ed on them): those they
    give as the text does, those they give otherwise, and how many they cannot measure (no runs, or no gradient
    analysis)."""
    same = [f"*{says}* ({figure})" for says, figure, _, holds in rows if holds]
    other = [f"*{says}* ({figure} in the text, {now} in yours)" for says, figure, now, holds in rows
             if not holds and now not in UNCHECKED]
    lines = [f"**Your runs in `{runs_dir}` reproduce {len(same)} of the text's {len(rows)} figures**"
             + (f": {'; '.join(same)}." if same else ".")]
    lines += [f"They give {len(other)} otherwise: {'; '.join(other)}."] if other else []
    missing = len(rows) - len(same) - len(other)
    lines += [f"{missing} need runs or gradient measurements that `{runs_dir}` does not have."] if missing else []
    return " ".join(lines)


def claims_markdown(rows: list[tuple[str, str, str, bool]]) -> str:
    """The claims check as a Markdown table: each figure as the text gives it, as measured, and whether it holds."""
    return markdown_table(None, [{"claim": says, "in the text": figure, "measured": now,
                                  "holds": "yes" if holds else "not checked" if now in UNCHECKED else "**no**"}
                                 for says, figure, now, holds in rows],
                          left=(0, 1, 2, 3))
