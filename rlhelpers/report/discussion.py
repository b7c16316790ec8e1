"""The report's discussion: prose in which every number is a named figure, filled in from the runs.

``DISCUSSION`` is a ``str.format`` template. Its figures come from ``findings.discussion_figures``
(histories and gradient measurements), from ``speed_figures`` (the learning-curve comparison and the
verdict words that follow from it), from ``conclusion_figures`` (what the measured values imply, each
clause chosen by the values) and from the published figures it cites. The template itself holds no
measured number and no conclusion that the data could contradict. It is rendered only once all six
report runs are complete; before that the report says which runs are missing and draws no conclusion.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlhelpers.report.findings import (
    MISSING,
    config_values,
    discussion_figures,
    gradient_values,
    hardware,
    pair_gaps,
    per_seed,
)
from rlhelpers.report.plotting import algo_curve, held_returns
from rlhelpers.report.results import (
    PLATEAU,
    PUBLISHED_A2C,
    REPORT_ENV_ID,
    RunSummary,
    against_published,
    incomplete_report_runs,
)
from rlhelpers.runner.config import ALGOS, expected_runs, parse_run_name

# Allen et al. 2017, "Mean Actor Critic" (arXiv 1709.00503): MAC's score on Pong, and the n-step length of
# the authors' code (its lr, pg_coef, vf_coef and ent_coef are task1's).
MAC_PONG = 10.6
MAC_N_STEPS = 1
# Below this relative difference in float64, two gradients are equal up to rounding.
ROUNDING = 1e-9
FASTER = "faster (both its seeds' curves above both of A2C's)"
SLOWER = "more slowly (both its seeds' curves below both of A2C's)"
OVERLAP = "neither clearly faster nor more slowly (its seeds' curves and A2C's overlap)"
SMALLER, ABOUT, LARGER, NOT_COMPARABLE = "smaller than", "about as large as", "larger than", "not yet comparable with"

DISCUSSION = """\
**Learning speed.** When each run left the plateau (the evaluation from which every later one stays
above {plateau}) and when its evaluation first passed {threshold}:

- A2C: left the plateau at {a2c_leave}; first above {threshold}: {a2c_pass}.
- task1: left the plateau at {task1_leave}; first above {threshold}: {task1_pass}.
- task2: left the plateau at {task2_leave}; first above {threshold}: {task2_pass}.

The published A2C curves with these hyperparameters leave {plateau} at about {published_leave}
steps and pass {threshold} at about {published_pass}. Against those ranges, our A2C's leaving the
plateau is {a2c_leave_against}; its passing {threshold} is {a2c_pass_against}. The two are read
differently: the published figures are where a training curve, averaged over recent training episodes,
first crosses; ours come from separate evaluations, leaving the plateau counts only once every later
evaluation stays above it (later than a first crossing for the same learning), and passing
{threshold} counts at the first single evaluation above it (earlier, since one lucky evaluation is enough).

Over the evaluations up to {compared_until} steps, which every algorithm's curve reached, the mean
return of the seed-averaged curve is {curve_mean_a2c} for A2C, {curve_mean_task1} for task1 and
{curve_mean_task2} for task2; per seed it is {seed_means_a2c} for A2C, {seed_means_task1} for task1
and {seed_means_task2} for task2. With two seeds, an algorithm counts as faster only when both its
seeds' curves lie above both of the other's. Compared with A2C, task1 learned {task1_vs_a2c}, and
task2 {task2_vs_a2c}.

**task1 against task2.** On the same states and weights their actor gradients agree to a relative
difference of at most {agreement_f32_max_rel} in float32 and {agreement_f64_max_rel} in float64:
{agreement_conclusion}. The two runs of one seed start from the same weights and environment seeds,
and their code differs only in the baseline subtracted inside the actor's loss, so their evaluation
histories can part only where rounding differences grow into different actions. They are
identical up to the evaluation at {task_pair_identical_until}. After that their mean returns are
{task_pair_gap} points apart on average, against {seed_pair_gap} between the two seeds of one
algorithm at the same evaluations (the standard error of one such gap is about {gap_sem}). The
task1/task2 gap is {pair_verdict} the seed-to-seed gap: {pair_conclusion}.

**All-action against sampled-action.** On the same states and the same Q critic, the sampled-action
estimator's variance over a batch of {batch_states} states is {variance_ratio} times the all-action
gradient's, and the batch's signal-to-noise ratio is {snr_all_action} for the all-action gradient
against {snr_sampled} for the sampled one. A2C's own estimator, with its V critic and n-step
advantage, has a signal-to-noise ratio of {snr_a2c} (below zero, the mean gradient is smaller than
the measurement's own noise). Lower variance {variance_verdict} here. What the measurements show
about the signal each actor follows (trained snapshots, step zero left out):

- *How well the Q critic separates the actions.* The all-action actor follows Q(s,a) − Ṽ(s), whose
  spread over the actions is {advantage_rms_task1} for task1 (root mean square over the states). A2C's
  actor follows A_t = R_t − V(s_t), of size {advantage_rms_a2c}, which also carries the noise of the
  sampled returns. Q's error against its n-step targets is {critic_error_over_advantage_task1} times
  that spread (the targets are noisy, so this overstates Q's own error): {critic_conclusion}.
- *What sets the policy's step.* RMSprop steps by lr·g / sqrt(v + ε), v the running mean square of a
  parameter's gradient and ε = {rms_eps}. At each run's last checkpoint, v lies below ε for
  {eps_share_policy_head_task1} of task1's policy-head parameters and {eps_share_policy_head_a2c} of
  A2C's: {regime_conclusion}. task1 weights its actor term by pg_coef {pg_coef_task1}, A2C by
  {pg_coef_a2c}; at the same training step A2C's actor term puts a gradient {head_actor_a2c_over_task1}
  times task1's on the policy head; their learning rates, {lr_task1} for task1 against {lr_a2c} for A2C,
  differ by a factor of {lr_ratio}.
- *The entropy bonus.* Its gradient on the policy head is {head_entropy_over_actor_task1} of the actor
  term's for task1 and {head_entropy_over_actor_a2c} for A2C, {entropy_conclusion}.
- *What shapes the shared features.* On the encoder, the critic term's gradient is
  {encoder_critic_over_actor_task1} times the actor term's for task1 and
  {encoder_critic_over_actor_a2c} for A2C: {encoder_conclusion}.

The Mean Actor-Critic paper (Allen et al. 2017, arXiv 1709.00503) reports MAC at {mac_pong} on Pong,
with n_steps {mac_n_steps} and task1's other coefficients; our runs use n_steps {n_steps}. task1's best
evaluation here is {task1_best}.

**Limits.** Two seeds per algorithm, so the spread between runs is known only roughly: the plot's
standard-error band pools the two seeds' episodes and leaves that spread out (the thin per-seed lines
show it); a budget of {budget} steps per run; the encoder in {precisions} on {hardware}; the bf16 and
fp32 gradients on the same batches have a cosine of at least {bf16_min_cosine}; the gradient measurements
use {measured_states} states per snapshot, played by the snapshot's own policy, and treat a batch's
states as independent.
"""


def _held_mean(record: dict[str, Any], steps: np.ndarray) -> float:
    """One run's mean return over ``steps``, its last evaluation held after it stopped early."""
    return float(np.mean([np.mean(returns) for returns in held_returns(record, steps).values()]))


def curve_means(
    histories: dict[str, dict[str, Any]],
) -> tuple[int | None, dict[str, float], dict[str, dict[str, float]]]:
    """Up to the last step that every algorithm's curve reached: each algorithm's mean return over its
    seed-averaged curve (held evaluations of stopped seeds included), each seed's own, and that step."""
    reported = set(expected_runs())
    records = {algo: [h for name, h in sorted(histories.items())
                      if name in reported and parse_run_name(name)[0] == algo] for algo in ALGOS}
    curves = {algo: algo_curve(runs) for algo, runs in records.items() if runs}
    if not curves:
        return None, {}, {}
    until = int(min(curve.steps[-1] for curve in curves.values()))
    means = {algo: float(np.mean(c.means[c.steps <= until])) for algo, c in curves.items()}
    seeds = {algo: {r["run_name"]: _held_mean(r, c.steps[c.steps <= until]) for r in records[algo]}
             for algo, c in curves.items()}
    return until, means, seeds


def _speed_word(seeds: list[float], a2c_seeds: list[float]) -> str:
    if min(seeds) > max(a2c_seeds):
        return FASTER
    return SLOWER if max(seeds) < min(a2c_seeds) else OVERLAP


def speed_figures(histories: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The curve comparison: each algorithm's and each seed's mean return up to the common step, and the verdicts."""
    until, means, seeds = curve_means(histories)
    figures = {"compared_until": MISSING if until is None else f"{until / 1e6:.1f}M"}
    for algo in ALGOS:
        figures[f"curve_mean_{algo}"] = f"{means[algo]:.1f}" if algo in means else MISSING
        figures[f"seed_means_{algo}"] = "; ".join(
            f"{value:.1f} (seed {parse_run_name(name)[1]})" for name, value in seeds.get(algo, {}).items()) or MISSING
    for algo in ("task1", "task2"):
        figures[f"{algo}_vs_a2c"] = (_speed_word(list(seeds[algo].values()), list(seeds["a2c"].values()))
                                     if {algo, "a2c"} <= set(seeds) else MISSING)
    verdicts = [figures["task1_vs_a2c"], figures["task2_vs_a2c"]]
    if MISSING in verdicts:
        figures["variance_verdict"] = MISSING
    elif verdicts == [FASTER, FASTER]:
        figures["variance_verdict"] = "bought faster learning"
    elif FASTER in verdicts:
        figures["variance_verdict"] = "did not consistently buy faster learning (task1 and task2 disagree)"
    else:
        figures["variance_verdict"] = "did not buy faster learning"
    return figures


def conclusion_figures(figures: dict[str, str], values: dict[str, list[float]]) -> dict[str, str]:
    """The words that state what the measured values imply; ``n/a`` where a value is missing."""
    def median(name: str) -> float | None:
        return float(np.median(values[name])) if values[name] else None

    f64 = max(values["agreement_f64_rel"], default=None)
    error_ratios = values["critic_error_over_advantage_task1"]
    entropy_task1, entropy_a2c = median("head_entropy_over_actor_task1"), median("head_entropy_over_actor_a2c")
    encoder_task1, encoder_a2c = median("encoder_critic_over_actor_task1"), median("encoder_critic_over_actor_a2c")
    shares = values["eps_share_policy_head_task1"] + values["eps_share_policy_head_a2c"]
    conclusions = {
        "agreement_conclusion": MISSING if f64 is None else (
            "the same gradient up to rounding" if f64 < ROUNDING else "further apart than rounding explains"),
        "pair_conclusion": {
            SMALLER: "once they part, task1 and task2 differ by less than two seeds of one algorithm do",
            ABOUT: ("the two differ by less than the standard error of one gap, so once rounding has parted them, "
                    "task1 and task2 of one seed drift as far apart as two seeds of one algorithm"),
            LARGER: "equal gradients leave only chance to explain it, and two pairs are too few to tell",
        }.get(figures["pair_verdict"], MISSING),
        "critic_conclusion": MISSING if not error_ratios else (
            "at every trained stage the differences between actions that the actor follows are smaller than "
            "the critic's error, so its low-variance direction rests on a poorly resolved ranking"
            if min(error_ratios) > 1 else
            "the critic resolves the differences between the actions at every trained stage"
            if max(error_ratios) < 1 else
            "at some stages the critic's error exceeds the differences between the actions, at others not"),
        "entropy_conclusion": MISSING if entropy_task1 is None or entropy_a2c is None else (
            "so on task1's policy head it pulls at least as hard as the actor" if entropy_task1 >= 1
            else "so it weighs more on task1's policy, beside the actor, than on A2C's"
            if entropy_task1 > entropy_a2c else "so it weighs no more on task1's policy than on A2C's"),
        "regime_conclusion": MISSING if not shares else (
            "there the step is close to plain gradient descent at rate lr / sqrt(ε), proportional to the "
            "gradient, so an actor term's weight and its advantage's size set how far the policy moves"
            if min(shares) > 0.5 else
            "there RMSprop largely divides the gradient's size away, so an actor term's weight and its "
            "advantage's size matter less than its share beside the entropy bonus"
            if max(shares) < 0.5 else
            "the regimes differ between runs, so how much an actor term's size matters differs too"),
        "encoder_conclusion": MISSING if encoder_task1 is None or encoder_a2c is None else (
            "task1's shared features are shaped more by its critic, and less by its actor, than A2C's"
            if encoder_task1 > encoder_a2c else
            "task1's shared features are shaped no more by its critic than A2C's"),
    }
    return conclusions


def discussion_markdown(rows: list[RunSummary], histories: dict[str, dict[str, Any]],
                        results: dict[str, Any] | None, threshold: float = 18.0) -> str:
    """The discussion, filled in from the runs and the measurements, or what it still waits for."""
    missing = incomplete_report_runs(rows)
    if missing:
        return (f"**Discussion pending.** It is written from all six {REPORT_ENV_ID} runs trained to their "
                f"budget; not yet complete: {', '.join(missing)}. No conclusion is drawn before then.")
    reported = set(expected_runs())
    report_rows = [r for r in rows if r.run_name in reported]
    figures = {**discussion_figures(report_rows, histories, results), **speed_figures(histories)}
    leave, pass_target = PUBLISHED_A2C["leave"], PUBLISHED_A2C["pass 18"]
    figures.update(
        a2c_leave_against=per_seed(report_rows, "a2c", lambda r: against_published(r.left_plateau, r.last_step, leave)),
        a2c_pass_against=per_seed(report_rows, "a2c",
                                  lambda r: against_published(r.first_exceed_step, r.last_step, pass_target)),
        plateau=f"{PLATEAU:g}", threshold=f"{threshold:g}",
        published_leave=f"{leave[0] / 1e6:g}–{leave[1] / 1e6:g}M",
        published_pass=f"{pass_target[0] / 1e6:g}–{pass_target[1] / 1e6:g}M",
        mac_pong=f"{MAC_PONG:g}", mac_n_steps=str(MAC_N_STEPS),
        n_steps=config_values(report_rows, histories, "n_steps"),
        budget=", ".join(f"{step / 1e6:g}M" for step in sorted({r.total_timesteps for r in report_rows})),
        precisions=", ".join(sorted({r.precision for r in report_rows})),
        hardware=hardware(report_rows, histories),
        rms_eps=config_values(report_rows, histories, "rms_eps"),
        pair_verdict=_pair_verdict(pair_gaps(histories)),
    )
    figures.update(conclusion_figures(figures, gradient_values(results)))
    return DISCUSSION.format(**figures)


def _pair_verdict(gaps: dict[str, float | None]) -> str:
    """How the task1/task2 gap compares with the seed-to-seed gap, unrounded: about as large when the two
    differ by at most the standard error of one gap."""
    task_pair, seed_pair, gap_sem = gaps["task_pair_gap"], gaps["seed_pair_gap"], gaps["gap_sem"]
    if task_pair is None or seed_pair is None:
        return NOT_COMPARABLE
    if abs(task_pair - seed_pair) <= (gap_sem or 0.0):
        return ABOUT
    return SMALLER if task_pair < seed_pair else LARGER
