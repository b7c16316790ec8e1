"""The figures the report's discussion quotes, each computed from the committed histories and results.

``discussion_figures`` returns them as formatted strings under fixed names, so that the discussion's
text can name them instead of typing numbers by hand:

- per algorithm (``a2c``, ``task1``, ``task2``), one entry per seed: ``<algo>_leave`` (the step from
  which every later evaluation exceeds -20), ``<algo>_pass`` (the first evaluation above the target),
  ``<algo>_last`` and ``<algo>_best`` (mean ± standard error);
- the task1/task2 pairs: ``task_pair_identical_until`` per seed, ``task_pair_gap`` (mean absolute gap
  between their mean returns after they part), for scale ``seed_pair_gap`` (the same between two seeds
  of one algorithm, at the same evaluation steps) and ``gap_sem`` (the typical standard error of one gap);
- from the gradient measurements (ranges over snapshots, ``gradient_values`` holding the values):
  ``agreement_f32_min_cosine``, ``agreement_f32_max_rel``, ``agreement_f64_max_rel``, ``variance_ratio``
  (sampled over all-action batch variance), ``snr_all_action``, ``snr_sampled``, ``snr_a2c`` (batch of
  one rollout), ``encoder_critic_over_actor_<algo>``, ``head_entropy_over_actor_<algo>`` (the entropy term's
  gradient on the policy head over the actor term's), ``advantage_rms_<algo>`` (the advantage the actor
  follows), ``critic_error_over_advantage_<algo>`` (for the Q critics: their error against the n-step
  returns over their spread across the actions), ``head_actor_a2c_over_task1`` (a2c's weighted actor-term
  gradient on the policy head over task1's, same seed and step), ``eps_share_policy_head_<algo>`` (the
  share of the policy head's parameters whose RMSprop mean square lies below epsilon at the run's last
  checkpoint) and ``bf16_min_cosine``; all but the agreement and bf16 figures leave out step 0, the
  untrained initialisation; and ``measured_states`` (states per snapshot) and ``batch_states`` (the
  batch the variances are given for);
- each algorithm's actor weight and learning rate as its runs' configs hold them: ``pg_coef_<algo>``,
  ``lr_<algo>``, and ``lr_ratio`` (task1's learning rate over A2C's).

A figure with no data behind it yet reads ``n/a``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from rlhelpers.core.evaluation import history_divergence
from rlhelpers.report.results import RunSummary
from rlhelpers.runner.config import ALGOS, SEED_PAIRS, TASK_PAIRS, expected_runs, parse_run_name

MISSING = "n/a"
DEVICE_KINDS = {"cpu": "CPU", "cuda": "GPU"}  # torch device type -> the word a reader knows


def _millions(step: int | None, missing: str) -> str:
    return missing if step is None else "step 0" if step == 0 else f"{step / 1e6:.1f}M"


# A format of its own for ratios whose range spans orders of magnitude: two significant digits, no exponent.
SIGNIFICANT = "significant"


def _format(value: float, fmt: str) -> str:
    """``value`` in the format ``fmt``, or with two significant digits for ``SIGNIFICANT`` (0.027, 0.33, 7.3,
    35, 108)."""
    if fmt != SIGNIFICANT:
        return format(value, fmt)
    decimals = 0 if value == 0 or not math.isfinite(value) else max(0, 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def _one(value: float | None, fmt: str) -> str:
    return MISSING if value is None else _format(value, fmt)


def _span(values: list[float], fmt: str) -> str:
    """``"low–high"`` of ``values``, each end formatted with ``fmt`` (``"low to high"`` from a negative low;
    one value if they agree), or ``n/a``."""
    if not values:
        return MISSING
    low, high = _format(min(values), fmt), _format(max(values), fmt)
    return low if low == high else f"{low} to {high}" if min(values) < 0 else f"{low}–{high}"


def per_seed(rows: list[RunSummary], algo: str, describe: Callable[[RunSummary], str]) -> str:
    """``describe(row)`` of each of ``algo``'s runs, as ``"<description> (seed <seed>); ..."``, or ``n/a``."""
    seeds = {name: parse_run_name(name)[1] for name in expected_runs((algo,))}
    return "; ".join(f"{describe(r)} (seed {seeds[r.run_name]})" for r in rows if r.run_name in seeds) or MISSING


def learning_figures(rows: list[RunSummary]) -> dict[str, str]:
    """When each run left the plateau and passed the target, and its last and best evaluations."""
    figures = {}
    for algo in ALGOS:
        figures[f"{algo}_leave"] = per_seed(rows, algo, lambda r: _millions(r.left_plateau, "not yet"))
        figures[f"{algo}_pass"] = per_seed(rows, algo, lambda r: _millions(r.first_exceed_step, "not reached"))
        figures[f"{algo}_last"] = per_seed(rows, algo, lambda r: f"{r.last_mean:.1f} ± {r.last_sem:.1f}")
        figures[f"{algo}_best"] = per_seed(rows, algo, lambda r: f"{r.best_mean:.1f} ± {r.best_sem:.1f}")
    return figures


def _divergences(histories: dict[str, dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(a, b): history_divergence(histories[a], histories[b])
            for a, b in (*TASK_PAIRS, *SEED_PAIRS) if a in histories and b in histories}


def pair_gaps(histories: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """After task1 and task2 of one seed part: their mean absolute gap (``task_pair_gap``), the gap between
    two seeds of one algorithm at the same evaluation steps (``seed_pair_gap``) and the typical standard
    error of one gap (``gap_sem``); None where the runs are missing."""
    return _pair_gaps(_divergences(histories))


def _pair_gaps(divergence: dict[tuple[str, str], dict[str, Any]]) -> dict[str, float | None]:
    task_steps = {step for pair in TASK_PAIRS if pair in divergence for step in divergence[pair]["mean_gap"]}

    def mean_over_task_steps(pairs: tuple[tuple[str, str], ...], key: str) -> float | None:
        values = [value for pair in pairs if pair in divergence
                  for step, value in divergence[pair][key].items() if step in task_steps]
        return float(np.mean(values)) if values else None

    return {"task_pair_gap": mean_over_task_steps(TASK_PAIRS, "mean_gap"),
            "seed_pair_gap": mean_over_task_steps(SEED_PAIRS, "mean_gap"),
            "gap_sem": mean_over_task_steps(TASK_PAIRS, "gap_sem")}


def divergence_figures(histories: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Where task1 and task2 of one seed part, and the ``pair_gaps`` to one decimal (two when the task and
    seed gaps differ but would print alike)."""
    divergence = _divergences(histories)
    parted = [f"{_millions(divergence[pair]['last_identical_step'], 'never identical')} "
              f"(seed {parse_run_name(pair[0])[1]})" for pair in TASK_PAIRS if pair in divergence]
    gaps = _pair_gaps(divergence)
    task_pair, seed_pair = gaps["task_pair_gap"], gaps["seed_pair_gap"]
    tie = None not in (task_pair, seed_pair) and f"{task_pair:.1f}" == f"{seed_pair:.1f}" and task_pair != seed_pair
    gaps = {name: _one(value, ".2f" if tie and name != "gap_sem" else ".1f") for name, value in gaps.items()}
    return {"task_pair_identical_until": "; ".join(parted) or MISSING, **gaps}


def gradient_values(results: dict[str, Any] | None) -> dict[str, list[float]]:
    """The measured values behind each gradient figure, one per snapshot. All but the bf16 and the
    task1/task2 agreement leave out step 0, the untrained initialisation that every run shares."""
    snapshots = list((results or {}).get("snapshots", {}).values())
    trained = [s for s in snapshots if s["step"] > 0]
    agreement = [s["task_gradient_agreement"] for s in snapshots if "task_gradient_agreement" in s]
    variance = [s["estimator_variance"] for s in trained if "estimator_variance" in s]
    values = {
        "agreement_f32_cosine": [a["float32"]["cosine"] for a in agreement],
        "agreement_f32_rel": [a["float32"]["relative_difference"] for a in agreement],
        "agreement_f64_rel": [a["float64"]["relative_difference"] for a in agreement],
        "variance_ratio": [v["sampled_over_all_action_batch"] for v in variance],
        "snr_all_action": [v["batch_signal_to_noise"]["all_action"] for v in variance],
        "snr_sampled": [v["batch_signal_to_noise"]["sampled"] for v in variance],
        "snr_a2c": [s["a2c_estimator_variance"]["batch_signal_to_noise"]["sampled"]
                    for s in trained if "a2c_estimator_variance" in s],
        "bf16_cosine": [s["bf16_agreement"]["cosine"] for s in snapshots],
        "measured_states": [v["n_states"] for v in variance],
        "batch_states": [v["batch"]["size"] for v in variance],
        "head_actor_a2c_over_task1": _head_actor_ratios(trained),
    }
    for algo in ALGOS:
        own = [s for s in trained if parse_run_name(s["run"])[0] == algo]
        terms = [s["loss_term_gradients"] for s in own if "loss_term_gradients" in s]
        scales = [s["advantage_scale"] for s in own if "advantage_scale" in s]
        values[f"encoder_critic_over_actor_{algo}"] = [t["critic"]["encoder"] / t["actor"]["encoder"]
                                                       for t in terms if t["actor"]["encoder"] > 0]
        values[f"head_entropy_over_actor_{algo}"] = [t["entropy"]["policy_head"] / t["actor"]["policy_head"]
                                                     for t in terms if t["actor"]["policy_head"] > 0]
        values[f"advantage_rms_{algo}"] = [a["advantage_rms"] for a in scales]
        values[f"critic_error_over_advantage_{algo}"] = [] if algo == "a2c" else [
            a["critic_rms_error"] / a["advantage_rms"] for a in scales if a["advantage_rms"] > 0]
        values[f"eps_share_policy_head_{algo}"] = [
            regime["groups"]["policy_head"]["below_eps_share"]
            for run, regime in (results or {}).get("optimizer_regime", {}).items() if parse_run_name(run)[0] == algo]
    return values


def _head_actor_ratios(trained: list[dict[str, Any]]) -> list[float]:
    """a2c's weighted actor-term gradient norm on the policy head over task1's, same seed and step."""
    head_actor = {(*parse_run_name(s["run"]), s["step"]): s["loss_term_gradients"]["actor"]["policy_head"]
                  for s in trained if "loss_term_gradients" in s}
    return [value / head_actor[("task1", seed, step)] for (algo, seed, step), value in head_actor.items()
            if algo == "a2c" and head_actor.get(("task1", seed, step))]


# How each gradient figure is formatted: a range of values, or one extreme.
SPAN_FORMATS = {"variance_ratio": SIGNIFICANT, "snr_all_action": SIGNIFICANT, "snr_sampled": SIGNIFICANT,
                "snr_a2c": SIGNIFICANT, "head_actor_a2c_over_task1": SIGNIFICANT,
                **{f"{name}_{algo}": fmt for algo in ALGOS for name, fmt in (
                    ("encoder_critic_over_actor", SIGNIFICANT), ("head_entropy_over_actor", SIGNIFICANT),
                    ("advantage_rms", ".3f"), ("critic_error_over_advantage", SIGNIFICANT),
                    ("eps_share_policy_head", ".1%"))}}


def gradient_figures(results: dict[str, Any] | None) -> dict[str, str]:
    """Ranges (or extremes) over the measured snapshots of the gradient facts (see ``rlhelpers.report.analysis``)."""
    values = gradient_values(results)
    figures = {name: _span(values[name], fmt) for name, fmt in SPAN_FORMATS.items()}
    figures.update(
        agreement_f32_min_cosine=_one(min(values["agreement_f32_cosine"], default=None), ".9f"),
        agreement_f32_max_rel=_one(max(values["agreement_f32_rel"], default=None), ".1e"),
        agreement_f64_max_rel=_one(max(values["agreement_f64_rel"], default=None), ".1e"),
        bf16_min_cosine=_one(min(values["bf16_cosine"], default=None), ".4f"),
        measured_states=_one(max(values["measured_states"], default=None), "d"),
        batch_states=_one(max(values["batch_states"], default=None), "d"),
    )
    return figures


def _config_set(rows: list[RunSummary], histories: dict[str, dict[str, Any]], key: str) -> set[Any]:
    """The distinct values of a config field over ``rows``' runs (None where it is not recorded)."""
    return {histories[r.run_name].get("config", {}).get(key) for r in rows}


def config_values(rows: list[RunSummary], histories: dict[str, dict[str, Any]], key: str) -> str:
    """Each distinct value of a config field over ``rows``' runs (``n/a`` where it is not recorded)."""
    values = _config_set(rows, histories, key)
    return ", ".join(sorted(MISSING if value is None else format(value, "g") for value in values)) or MISSING


def _single(values: set[Any]) -> Any:
    """The one value of ``values``, or None when there are none, several, or it is not recorded."""
    return next(iter(values)) if len(values) == 1 else None


def coefficient_figures(rows: list[RunSummary], histories: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each algorithm's actor weight and learning rate as its report runs were trained (``pg_coef_<algo>``,
    ``lr_<algo>``), and ``lr_ratio``, task1's learning rate over A2C's when each has a single one."""
    by_algo = {algo: [r for r in rows if r.run_name in expected_runs((algo,))] for algo in ALGOS}
    figures = {f"{name}_{algo}": config_values(algo_rows, histories, name)
               for algo, algo_rows in by_algo.items() for name in ("pg_coef", "lr")}
    lr = {algo: _single(_config_set(algo_rows, histories, "lr")) for algo, algo_rows in by_algo.items()}
    figures["lr_ratio"] = _one(lr["task1"] / lr["a2c"], ".1f") if lr["task1"] and lr["a2c"] else MISSING
    return figures


def _device(session: dict[str, Any]) -> str:
    """One training session's device in a reader's words: ``CPU <model>``, ``GPU <model>``, else torch's name."""
    device = str(session.get("device") or MISSING)
    kind = DEVICE_KINDS.get(device.split(":")[0])
    return f"{kind} {session['device_name']}" if kind and session.get("device_name") else device


def hardware(rows: list[RunSummary], histories: dict[str, dict[str, Any]]) -> str:
    """Each distinct device that trained ``rows``' runs, from their provenance; ``n/a`` for a run that
    recorded none."""
    devices = {_device(session) for r in rows for session in histories[r.run_name].get("provenance") or [{}]}
    return ", ".join(sorted(devices)) or MISSING


def discussion_figures(rows: list[RunSummary], histories: dict[str, dict[str, Any]],
                       results: dict[str, Any] | None) -> dict[str, str]:
    """Every figure the discussion quotes, by name (see the module docstring)."""
    return {**learning_figures(rows), **divergence_figures(histories), **gradient_figures(results),
            **coefficient_figures(rows, histories)}
