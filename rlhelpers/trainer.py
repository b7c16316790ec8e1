"""The training loop: collect a rollout, bootstrap, update; evaluate, log and checkpoint on schedule.

``Trainer`` owns the algorithm (envs, model, optimizer, rollout) and its state; ``train`` runs
one (algo, seed) end to end with its run directory, lock, W&B run and progress bar, resuming from
the run's newest checkpoint when there is one.
"""

from __future__ import annotations

import dataclasses
import random
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from rlhelpers.buffer import RolloutBuffer
from rlhelpers.checkpoint import RunDirectory
from rlhelpers.config import EVAL_SEED_OFFSET, TrainConfig, config_differences, validate
from rlhelpers.envs import atari_game, final_observations, finished_episodes, make_vec_env
from rlhelpers.errors import RLHelpersError
from rlhelpers.evaluation import evaluate_policy
from rlhelpers.losses import LOSSES, state_value
from rlhelpers.metrics_log import METRICS_FILE, MetricsLog
from rlhelpers.networks import ActorCritic, build_model, resolve_precision, sample_actions
from rlhelpers.optim import RMSpropTFLike
from rlhelpers.provenance import session_provenance
from rlhelpers.runlock import RunLock
from rlhelpers.tracking import Tracker, new_run_id

CHECKPOINT_FORMAT = 2


def resolve_device(device: str) -> torch.device:
    """``auto`` picks CUDA when present, else the CPU; an unavailable CUDA device is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RLHelpersError(f"device {device!r} requested but CUDA is not available here; use --device auto or cpu")
    return torch.device(device)


def resolve_config(config: TrainConfig) -> TrainConfig:
    """The validated config with ``precision`` resolved to what this machine will run (fp32 or bf16)."""
    validate(config)
    device = resolve_device(config.device)
    precision = resolve_precision(config.precision, device, image_obs=atari_game(config.env_id) is not None)
    return dataclasses.replace(config, precision=precision)


class Trainer:
    """One actor-critic learner: training envs, model, optimizer, rollout storage and counters."""

    def __init__(self, config: TrainConfig, model: ActorCritic | None = None) -> None:
        config = self.config = resolve_config(config)
        self.device = resolve_device(config.device)
        if config.torch_threads:
            # On an idle 2-core machine torch's default (2 threads) trains ~1.35x faster than 1 thread;
            # with other processes competing for the cores, 1 thread avoids a collapse of the update (bench/).
            torch.set_num_threads(config.torch_threads)
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        self.env = make_vec_env(config.env_id, config.n_envs, num_threads=config.env_threads)
        self.eval_env = None
        obs_space = self.env.single_observation_space
        self.n_actions = int(self.env.single_action_space.n)
        self.clip_rewards = atari_game(config.env_id) is not None
        if model is None:
            model = build_model(obs_space.shape, self.n_actions, config.algo, config.hidden_size, config.precision)
        self.model = model.to(self.device)
        self.optimizer = RMSpropTFLike(self.model.parameters(), lr=config.lr, alpha=config.rms_alpha,
                                       eps=config.rms_eps)
        self.loss_fn = LOSSES[config.algo]
        obs_dtype = torch.uint8 if obs_space.dtype == np.uint8 else torch.float32
        self.buffer = RolloutBuffer(config.n_steps, config.n_envs, obs_space.shape, obs_dtype, self.device)
        self.num_timesteps = 0
        self.n_updates = 0
        self.episode_returns: deque[float] = deque(maxlen=100)
        self.episode_lengths: deque[int] = deque(maxlen=100)
        self.n_episodes = 0
        self.eval_history: list[dict[str, Any]] = []
        self.sessions: list[dict[str, Any]] = []  # provenance of each training session
        self.train_seconds = 0.0  # wall-clock time spent training (evaluations included), over all sessions
        self.obs = self._reset_envs(config.seed)

    def _reset_envs(self, seed: int) -> torch.Tensor:
        obs, _ = self.env.reset(seed=seed)
        return torch.as_tensor(obs, device=self.device)

    @torch.inference_mode()
    def _values(self, obs: torch.Tensor) -> torch.Tensor:
        """V(s) (a2c) or V~(s) = sum_a pi(a|s) Q(s,a) (task1/task2) for bootstrapping."""
        return state_value(*self.model(obs))

    @torch.inference_mode()
    def collect_rollout(self) -> None:
        """Play n_steps in every training env with actions sampled from pi, filling the buffer."""
        buf = self.buffer
        for t in range(self.config.n_steps):
            buf.observations[t].copy_(self.obs)
            logits, _ = self.model(self.obs)
            actions = sample_actions(logits)
            buf.actions[t].copy_(actions)
            next_obs, rewards, terminated, truncated, info = self.env.step(actions.cpu().numpy())
            scores, lengths = finished_episodes(info)
            self.episode_returns.extend(scores.tolist())
            self.episode_lengths.extend(lengths.tolist())
            self.n_episodes += len(scores)
            if self.clip_rewards:
                rewards = np.sign(rewards)
            buf.rewards[t].copy_(torch.as_tensor(rewards))
            buf.terminated[t].copy_(torch.as_tensor(terminated))
            buf.truncated[t].copy_(torch.as_tensor(truncated))
            buf.truncation_values[t].zero_()
            # A timeout is not a real end: bootstrap from the critic's value of the true last observation.
            timeouts = np.flatnonzero(truncated & ~terminated)
            if len(timeouts):
                final_obs = torch.as_tensor(final_observations(info, timeouts), device=self.device)
                buf.truncation_values[t, torch.as_tensor(timeouts, device=self.device)] = self._values(final_obs)
            self.obs = torch.as_tensor(next_obs, device=self.device)
        self.num_timesteps += self.config.batch_size

    def update(self) -> dict[str, torch.Tensor]:
        """One gradient step on the stored rollout; returns detached statistics."""
        cfg = self.config
        returns = self.buffer.returns(self._values(self.obs), cfg.gamma).flatten()
        logits, critic = self.model(self.buffer.observations.flatten(0, 1))
        loss, stats = self.loss_fn(logits, critic, self.buffer.actions.flatten(), returns,
                                   pg_coef=cfg.pg_coef, vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        stats["grad_norm"] = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        self.n_updates += 1
        stats["loss"] = loss.detach()
        return stats

    def train_iteration(self) -> dict[str, torch.Tensor]:
        """Collect one rollout and update on it."""
        self.collect_rollout()
        return self.update()

    def evaluate(self) -> dict[str, Any]:
        """Evaluate the current policy and append ``{"step", "returns", "lengths"}`` to the history."""
        cfg = self.config
        if self.eval_env is None:
            self.eval_env = make_vec_env(cfg.env_id, min(cfg.n_eval_envs, cfg.n_eval_episodes),
                                         num_threads=cfg.env_threads)
        seed = cfg.seed + EVAL_SEED_OFFSET + len(self.eval_history) * self.eval_env.num_envs
        self.model.eval()
        returns, lengths = evaluate_policy(self.model, self.eval_env, cfg.n_eval_episodes, seed, self.device)
        self.model.train()
        record = {"step": self.num_timesteps, "returns": returns, "lengths": lengths,
                  "time": round(time.time(), 3), "train_seconds": round(self.train_seconds, 3)}
        self.eval_history.append(record)
        return record

    def begin_session(self) -> None:
        """Record the provenance of the session that trains from the current step on."""
        cfg = self.config
        self.sessions.append(session_provenance(self.device, cfg.precision, cfg.env_threads, self.num_timesteps))

    def snapshot(self) -> dict[str, Any]:
        """Model weights and what rebuilds the model (no optimizer): the analysis's view of the policy."""
        return {"step": self.num_timesteps, "config": self.config.to_dict(),
                "obs_shape": list(self.env.single_observation_space.shape), "n_actions": self.n_actions,
                "model": self.model.state_dict()}

    def state_dict(self) -> dict[str, Any]:
        """Full training state; only tensors and plain Python values (loads with weights_only=True)."""
        return {
            "format": CHECKPOINT_FORMAT,
            "config": self.config.to_dict(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "num_timesteps": self.num_timesteps,
            "n_updates": self.n_updates,
            "n_episodes": self.n_episodes,
            "episode_returns": list(self.episode_returns),
            "episode_lengths": list(self.episode_lengths),
            "eval_history": self.eval_history,
            "sessions": self.sessions,
            "train_seconds": self.train_seconds,
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict``; training envs restart from a reset seeded by the step count."""
        if state.get("format") != CHECKPOINT_FORMAT:
            raise RLHelpersError(f"checkpoint format {state.get('format')!r} is not this version's "
                                 f"({CHECKPOINT_FORMAT}); resume it with the rlhelpers version that wrote it")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.num_timesteps = int(state["num_timesteps"])
        self.n_updates = int(state["n_updates"])
        self.n_episodes = int(state["n_episodes"])
        self.episode_returns.extend(state["episode_returns"])
        self.episode_lengths.extend(state["episode_lengths"])
        self.eval_history = list(state["eval_history"])
        self.sessions = list(state["sessions"])
        self.train_seconds = float(state["train_seconds"])
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate(state["rng"]["python"])
        if torch.cuda.is_available() and state["rng"]["cuda"]:
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        # The emulator state is not saved: episodes in progress at the checkpoint are restarted.
        self.obs = self._reset_envs(self.config.seed + self.num_timesteps)

    def close(self) -> None:
        self.env.close()
        if self.eval_env is not None:
            self.eval_env.close()


def mean_return(record: dict[str, Any]) -> float:
    """Mean evaluation return of one history record."""
    return float(np.mean(record["returns"]))


def history_finished(record: dict[str, Any]) -> bool:
    """Whether an eval_history.json record shows its run done by its own config: the budget is spent
    or the last evaluation exceeded ``stop_return``."""
    history, config = record.get("history") or [], record.get("config", {})
    if not history:
        return False
    return (history[-1]["step"] >= config.get("total_timesteps", float("inf"))
            or mean_return(history[-1]) > config.get("stop_return", float("inf")))


@dataclass
class RunResult:
    """What ``train`` leaves behind: where the run lives and how it ended."""

    run_dir: Path
    num_timesteps: int
    eval_history: list[dict[str, Any]]
    stop_reason: str
    wandb_url: str | None
    wandb_run_id: str


def _history_record(trainer: Trainer, run_id: str) -> dict[str, Any]:
    config = trainer.config
    return {"run_name": config.run_name, "wandb_run_id": run_id, "config": config.to_dict(),
            "provenance": trainer.sessions, "history": trainer.eval_history}


class _StopRequest:
    """Turns SIGTERM into a request that the loop honours between updates: checkpoint, then return."""

    def __init__(self) -> None:
        self.requested = False
        self._previous = None

    def __enter__(self) -> _StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


def _check_resumable(saved: dict[str, Any], config: TrainConfig, where: Path) -> None:
    differences = config_differences(saved, config)
    if differences:
        raise RLHelpersError(
            f"run directory {where} holds a run with a different config ({'; '.join(differences)}); "
            "use the saved settings, another --runs-dir, or delete that directory to start over")


def train(config: TrainConfig, show_progress: bool = True) -> RunResult:
    """Train (or resume) the run (config.algo, config.seed) in ``<runs_dir>/<algo>_seed-<seed>``.

    Evaluates at step 0 and every ``eval_interval`` steps and at the end of the budget, checkpoints
    after each evaluation and every ``checkpoint_interval_s`` seconds, and stops at
    ``total_timesteps`` or once the mean evaluation return exceeds ``stop_return``. Saves the model
    weights every ``snapshot_interval`` steps and at the end. SIGTERM checkpoints and returns.
    """
    config = resolve_config(config)
    run_dir = RunDirectory(Path(config.runs_dir) / config.run_name)
    saved_record = run_dir.read_history()
    if saved_record is not None:
        _check_resumable(saved_record.get("config", {}), config, run_dir.path)
    run_dir.create()
    lock = RunLock(run_dir.path)
    lock.acquire()
    trainer = None
    tracker = None
    try:
        run_dir.remove_stale_files()  # leftovers of a writer killed mid-checkpoint; we hold the lock now
        state = run_dir.load_latest_checkpoint()
        if state is not None:
            _check_resumable(state["config"], config, run_dir.path)
            # A writer killed between its rename and its pruning leaves one checkpoint too many.
            run_dir.prune(int(state["num_timesteps"]), config.keep_checkpoints)
        elif saved_record is not None and saved_record.get("history"):
            history = saved_record["history"]
            if history_finished(saved_record):
                # Committed results come without checkpoints: a finished run is reported, not retrained.
                print(f"{config.run_name} is finished (evaluated up to step {history[-1]['step']:,}, "
                      f"last evaluation {mean_return(history[-1]):.2f}); its checkpoints are not here, "
                      "so it is reported as it is", file=sys.stderr)
                return RunResult(run_dir.path, int(history[-1]["step"]), history, "finished earlier", None,
                                 saved_record.get("wandb_run_id", ""))
            raise RLHelpersError(
                f"{run_dir.history_path} has evaluation results up to step {history[-1]['step']:,} but no "
                "checkpoint was found; restore the checkpoint files, train your own run in another runs "
                "directory (--runs-dir, or runs_dir in the notebook), or delete this run directory to start over")
        run_id = (state or {}).get("wandb_run_id") or (saved_record or {}).get("wandb_run_id") or new_run_id()
        trainer = Trainer(config)
        if state is not None:
            trainer.load_state_dict(state)
            print(f"Resuming {config.run_name} from step {trainer.num_timesteps:,} ({run_dir.path})", file=sys.stderr)
        trainer.begin_session()
        metrics_log = MetricsLog(run_dir.path / METRICS_FILE)
        # Lines logged after the checkpoint belong to work that is about to be redone.
        metrics_log.drop_after(trainer.num_timesteps if state is not None else -1)
        run_dir.write_history(_history_record(trainer, run_id))
        tracker = Tracker(config, run_id, metrics_log)
        with _StopRequest() as stop:
            stop_reason = _train_loop(trainer, run_dir, lock, tracker, run_id, show_progress, stop)
        return RunResult(run_dir.path, trainer.num_timesteps, trainer.eval_history, stop_reason, tracker.url, run_id)
    except BaseException:
        if tracker is not None:
            tracker.finish(exit_code=1)  # an interrupted or failed session shows as such in W&B
            tracker = None
        raise
    finally:
        if tracker is not None:
            tracker.finish()
        if trainer is not None:
            trainer.close()
        lock.release()


def _train_loop(trainer: Trainer, run_dir: RunDirectory, lock: RunLock, tracker: Tracker,
                run_id: str, show_progress: bool, stop: _StopRequest) -> str:
    cfg = trainer.config
    clock = time.monotonic()

    def tick() -> None:
        nonlocal clock
        now = time.monotonic()
        trainer.train_seconds += now - clock
        clock = now

    def save() -> None:
        tick()
        state = trainer.state_dict()
        state["wandb_run_id"] = run_id
        run_dir.save_checkpoint(state, trainer.num_timesteps, cfg.keep_checkpoints)
        run_dir.write_history(_history_record(trainer, run_id))
        lock.heartbeat()

    def evaluate() -> float:
        tick()
        record = trainer.evaluate()
        score = mean_return(record)
        tracker.log({"eval/mean_return": score, "eval/std_return": float(np.std(record["returns"])),
                     "eval/mean_length": float(np.mean(record["lengths"]))}, trainer.num_timesteps)
        save()
        bar.set_postfix_str(f"eval {score:.1f}", refresh=False)
        return score

    def reached(history: list[dict[str, Any]]) -> bool:
        return bool(history) and mean_return(history[-1]) > cfg.stop_return

    def finish(reason: str) -> str:
        run_dir.save_snapshot(trainer.snapshot(), trainer.num_timesteps)
        return reason

    last_eval_step = trainer.eval_history[-1]["step"] if trainer.eval_history else None
    next_eval = 0 if last_eval_step is None else (last_eval_step // cfg.eval_interval + 1) * cfg.eval_interval
    next_snapshot = -(-trainer.num_timesteps // cfg.snapshot_interval) * cfg.snapshot_interval
    # In a notebook every refresh is kept in the saved output: refresh rarely there (tqdm's monitor
    # would otherwise force one every 10-15 s).
    mininterval = 1.0 if sys.stderr.isatty() else 30.0
    bar = tqdm(total=cfg.total_timesteps, initial=min(trainer.num_timesteps, cfg.total_timesteps),
               desc=cfg.run_name, unit="step", unit_scale=True, disable=not show_progress,
               mininterval=mininterval, maxinterval=mininterval, file=sys.stderr)
    if trainer.eval_history:
        bar.set_postfix_str(f"eval {mean_return(trainer.eval_history[-1]):.1f}", refresh=False)
    try:
        if reached(trainer.eval_history):
            return "stop_return"
        log_every = max(1, 10_000 // cfg.batch_size)
        stats_sum: torch.Tensor | None = None
        stats_count = 0
        last_save = time.monotonic()
        log_time, log_steps = time.monotonic(), trainer.num_timesteps
        while True:
            if trainer.num_timesteps >= next_snapshot:
                run_dir.save_snapshot(trainer.snapshot(), trainer.num_timesteps)
                next_snapshot = (trainer.num_timesteps // cfg.snapshot_interval + 1) * cfg.snapshot_interval
            if trainer.num_timesteps >= next_eval:
                next_eval = (trainer.num_timesteps // cfg.eval_interval + 1) * cfg.eval_interval
                last_eval_step = trainer.num_timesteps
                if evaluate() > cfg.stop_return:
                    return finish("stop_return")
                last_save = time.monotonic()
            if trainer.num_timesteps >= cfg.total_timesteps:
                break
            stats = trainer.train_iteration()
            bar.update(cfg.batch_size)
            keys = sorted(stats)
            stacked = torch.stack([stats[k].float() for k in keys])
            stats_sum = stacked if stats_sum is None else stats_sum + stacked
            stats_count += 1
            if trainer.n_updates % log_every == 0:
                now = time.monotonic()
                fps = (trainer.num_timesteps - log_steps) / max(now - log_time, 1e-9)
                metrics = {f"losses/{k}": v / stats_count for k, v in zip(keys, stats_sum.tolist(), strict=True)}
                metrics["charts/fps"] = fps
                if trainer.episode_returns:
                    metrics["charts/episode_return"] = float(np.mean(trainer.episode_returns))
                    metrics["charts/episode_length"] = float(np.mean(trainer.episode_lengths))
                tracker.log(metrics, trainer.num_timesteps)
                stats_sum, stats_count = None, 0
                log_time, log_steps = now, trainer.num_timesteps
                lock.heartbeat()
            if stop.requested:
                save()
                return "stopped by SIGTERM"
            if time.monotonic() - last_save >= cfg.checkpoint_interval_s:
                save()
                last_save = time.monotonic()
        if last_eval_step != trainer.num_timesteps and evaluate() > cfg.stop_return:
            return finish("stop_return")
        return finish("total_timesteps")
    finally:
        bar.close()
