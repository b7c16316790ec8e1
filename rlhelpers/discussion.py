"""The report's discussion: prose in which every number is a named figure, filled in from the runs.

``DISCUSSION`` is a ``str.format`` template. Its figures come from ``findings.discussion_figures``
(histories and gradient measurements), from ``speed_figures`` (the learning-curve comparison and the
verdict words that follow from it) and from the published figures it cites. The template itself
holds no measured number. It is rendered only once all six report runs are complete; before that
the report says which runs are missing and draws no conclusion.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlhelpers.config import ALGO_DEFAULTS, ALGOS
from rlhelpers.findings import MISSING, discussion_figures, per_seed
from rlhelpers.plotting import algo_curve, expected_runs
from rlhelpers.report import (
    PLATEAU,
    PUBLISHED_A2C,
    REPORT_ENV_ID,
    RunSummary,
    against_published,
    incomplete_report_runs,
)

# Allen et al. 2017, "Mean Actor Critic" (arXiv 1709.00503): MAC's score on Pong, and the n-step length of
# the authors' code (its lr, pg_coef, vf_coef and ent_coef are task1's).
MAC_PONG = 10.6
MAC_N_STEPS = 1
# Two algorithms whose mean returns over the compared evaluations differ by less than this learn "about as fast".
SAME_SPEED = 1.0

DISCUSSION = """\
**Learning speed.** When each run left the plateau (the evaluation from which every later one stays
above {plateau}) and when its evaluation first passed {threshold}:

- A2C: left the plateau at {a2c_leave}; first above {threshold}: {a2c_pass}.
- task1: left the plateau at {task1_leave}; first above {threshold}: {task1_pass}.
- task2: left the plateau at {task2_leave}; first above {threshold}: {task2_pass}.

The published A2C curves with these hyperparameters leave {plateau} at about {published_leave}
steps and pass {threshold} at about {published_pass}. Against those ranges, our A2C's leaving the
plateau is {a2c_leave_against}; its passing {threshold} is {a2c_pass_against}.

Over the evaluations up to {compared_until} steps, which every algorithm's curve reached, the mean
return of the seed-averaged curve is {curve_mean_a2c} for A2C, {curve_mean_task1} for task1 and
{curve_mean_task2} for task2: task1 learned {task1_vs_a2c} A2C, and task2 {task2_vs_a2c} A2C.

**task1 against task2.** On the same states and weights their actor gradients agree to a relative
difference of at most {agreement_f32_max_rel} in float32 and {agreement_f64_max_rel} in float64: one
algorithm, up to rounding. Their same-seed evaluation histories are identical until
{task_pair_identical_until}; from there rounding differences grow into different actions, and the
two drift apart by {task_pair_gap} points of return on average, against {seed_pair_gap} between the
two seeds of one algorithm. The task1/task2 gap is {pair_verdict} the seed-to-seed gap. Since their
gradients are equal, task1 and task2 are one algorithm run twice with different rounding, and their
gap measures run-to-run chance, not a difference between algorithms.

**All-action against sampled-action.** On the same states and the same Q critic, the sampled-action
estimator's variance over a batch of {batch_states} states is {variance_ratio} times the all-action
gradient's, and the batch's signal-to-noise ratio is {snr_all_action} for the all-action gradient
against {snr_sampled} for the sampled one. A2C's own estimator, with its V critic and n-step
advantage, has a signal-to-noise ratio of only {snr_a2c} (below zero, the mean gradient is smaller
than the measurement's own noise). Lower variance {variance_verdict} here. What the measurements
show about why:

- *The Q critic hardly tells the actions apart.* The all-action gradient follows Q(s,a) − Ṽ(s), whose
  spread over the actions is {advantage_rms_task1} (root mean square, trained snapshots of task1)
  against A2C's advantage of {advantage_rms_a2c}. Q's own error against its n-step targets is
  {critic_error_over_advantage_task1} times that spread, so the ranking of the actions that the actor
  follows rests on a critic whose error dwarfs the differences it is asked to rank: low variance, but a
  weak and biased direction.
- *The actor's weight.* task1 weights its actor term by pg_coef {pg_coef_task1}, A2C by
  {pg_coef_a2c}; with the smaller advantage, A2C's actor term puts a gradient {head_actor_a2c_over_task1}
  times larger on the policy head at the same training step. task1's larger learning rate
  ({lr_task1} against {lr_a2c}) makes up only a factor of {lr_ratio}.
- *The critic shapes the shared features.* On the encoder, the critic term's gradient is
  {encoder_critic_over_actor_task1} times the actor term's for task1, against
  {encoder_critic_over_actor_a2c} for A2C: task1's features are learned almost only for predicting Q.
- *Not the entropy bonus.* Its gradient on the policy head is {head_entropy_over_actor_task1} of the
  actor term's for task1 ({head_entropy_over_actor_a2c} for A2C).

The Mean Actor-Critic paper (Allen et al. 2017, arXiv 1709.00503) reports MAC at {mac_pong} on Pong,
with n_steps {mac_n_steps} and task1's other coefficients; our runs use n_steps {n_steps}. task1's best
evaluation here is {task1_best}.

**Limits.** Two seeds per algorithm, so the spread between runs is known only roughly; a budget of
{budget} steps per run; the encoder in {precisions} on a CPU (the bf16 and fp32 gradients on the same
batches have a cosine of at least {bf16_min_cosine}); the gradient measurements use
{measured_states} states per snapshot, from the snapshots' own rollouts.
"""


def curve_means(histories: dict[str, dict[str, Any]]) -> tuple[int | None, dict[str, float]]:
    """Each algorithm's mean return over its seed-averaged curve's evaluations up to the last step
    that every algorithm's curve reached (held evaluations of stopped seeds included), and that step."""
    reported = set(expected_runs())
    curves = {}
    for algo in ALGOS:
        records = [h for name, h in histories.items() if name in reported and name.startswith(f"{algo}_seed-")]
        if records:
            curves[algo] = algo_curve(records)
    if not curves:
        return None, {}
    until = int(min(curve.steps[-1] for curve in curves.values()))
    return until, {algo: float(np.mean(c.means[c.steps <= until])) for algo, c in curves.items()}


def _speed_word(difference: float) -> str:
    if abs(difference) < SAME_SPEED:
        return "about as fast as"
    return "faster than" if difference > 0 else "more slowly than"


def speed_figures(histories: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The curve comparison: each algorithm's mean return up to the common step, and the verdicts."""
    until, means = curve_means(histories)
    figures = {"compared_until": MISSING if until is None else f"{until / 1e6:.1f}M"}
    for algo in ALGOS:
        figures[f"curve_mean_{algo}"] = f"{means[algo]:.1f}" if algo in means else MISSING
    for algo in ("task1", "task2"):
        figures[f"{algo}_vs_a2c"] = _speed_word(means[algo] - means["a2c"]) if {algo, "a2c"} <= set(means) else MISSING
    faster = any(figures[f"{algo}_vs_a2c"] == "faster than" for algo in ("task1", "task2"))
    figures["variance_verdict"] = "bought faster learning" if faster else "did not buy faster learning"
    return figures


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
        n_steps=", ".join(sorted({str(histories[r.run_name]["config"]["n_steps"]) for r in report_rows})),
        budget=", ".join(f"{step / 1e6:g}M" for step in sorted({r.total_timesteps for r in report_rows})),
        precisions=", ".join(sorted({r.precision for r in report_rows})),
        lr_ratio=f"{ALGO_DEFAULTS['task1']['lr'] / ALGO_DEFAULTS['a2c']['lr']:.1f}",
        pair_verdict=_pair_verdict(figures["task_pair_gap"], figures["seed_pair_gap"]),
    )
    return DISCUSSION.format(**figures)


def _pair_verdict(task_pair_gap: str, seed_pair_gap: str) -> str:
    if MISSING in (task_pair_gap, seed_pair_gap):
        return "not yet comparable with"
    return "within" if float(task_pair_gap) <= float(seed_pair_gap) else "larger than"
