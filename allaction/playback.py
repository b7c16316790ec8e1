"""A trained agent outside its run: the committed float16 policy, its re-evaluation, and a video of it.

``policy.pt`` in a run directory holds the final model weights in float16 (no optimizer; a few MB,
small enough to commit) with what rebuilds the model. ``evaluate_policy_file`` re-scores it on fresh evaluation
seeds, with sampled or greedy actions, and ``save_rescore`` keeps that result beside it (``policy_rescore.json``,
``policy_rescore_greedy.json``, committed with the policy); ``record_video`` plays one episode into an animated GIF
with the score drawn on every frame.
"""

from __future__ import annotations

import json
import math
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import imageio.v3 as iio
import numpy as np
import torch
from PIL import Image, ImageDraw
from tqdm import tqdm

from rlhelpers.core.envs import make_vec_env
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.evaluation import evaluate_policy, mean_and_sem
from rlhelpers.core.networks import ActorCritic, sample_actions
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.store import (
    GREEDY_RESCORE_FILE,
    POLICY_FILE,
    RESCORE_FILE,
    RunDirectory,
    RunRecord,
    load_model,
    read_run,
    write_atomically,
)

MAX_POLICY_BYTES = 4 * 1024 * 1024
MAX_VIDEO_BYTES = 2 * 1024 * 1024
REPLAY_SEED_OFFSET = 2**30 + 2**29  # far above the report runs' training and evaluation seeds


def export_policy(run_dir: str | Path) -> Path:
    """Write the run's newest snapshot as ``policy.pt``: the model weights in float16."""
    run = RunDirectory(run_dir)
    snapshots = run.snapshots()
    if not snapshots:
        raise RLHelpersError(f"{run.path} has no model snapshot to export; train the run first")
    snapshot = torch.load(snapshots[-1][1], map_location="cpu", weights_only=True)
    snapshot["model"] = {name: value.half() if value.is_floating_point() else value
                         for name, value in snapshot["model"].items()}
    snapshot["config"] = TrainConfig.from_dict(snapshot["config"]).to_dict()
    target = run.path / POLICY_FILE
    write_atomically(target, lambda f: torch.save(snapshot, f))
    if target.stat().st_size > MAX_POLICY_BYTES:
        raise RLHelpersError(f"{target} is {target.stat().st_size:,} bytes, over the {MAX_POLICY_BYTES:,} allowed")
    return target


def load_policy(path: str | Path) -> tuple[ActorCritic, TrainConfig, int]:
    """Model (float32), config and step of a ``policy.pt`` or a snapshot file."""
    path = Path(path)
    if not path.is_file():
        raise RLHelpersError(f"no policy file at {path}: export it from the run's snapshots "
                             f"with `python -m allaction evaluate {path.parent} --export`")
    model, config, step = load_model(path)
    return model.eval(), config, step


@dataclass
class Rescore:
    """A policy's new evaluation set (``seed`` the replay seed, ``step`` the policy's training step; ``greedy``: its
    most likely actions, not sampled ones) beside the run's last evaluation."""

    returns: list[float]
    mean: float
    sem: float
    last_mean: float | None
    last_sem: float | None
    step: int
    seed: int
    greedy: bool = False

    @property
    def consistent(self) -> bool | None:
        """Whether the two means differ by less than 1.96 standard errors of their difference (None for greedy
        actions, which the run's sampled evaluations do not measure)."""
        if self.greedy or self.last_mean is None or self.last_sem is None:  # both None, or both given
            return None
        return abs(self.mean - self.last_mean) <= 1.96 * math.hypot(self.sem, self.last_sem)


def evaluate_policy_file(run_dir: str | Path, episodes: int = TrainConfig.n_eval_episodes, seed: int = 0,
                         show_progress: bool = False, greedy: bool = False) -> Rescore:
    """Re-score ``<run_dir>/policy.pt`` over ``episodes`` complete episodes (``greedy``: with its most likely
    actions), on env seeds far from every report run's training and evaluation seeds (a progress bar counts the
    episodes when ``show_progress``)."""
    if episodes < 1:
        raise RLHelpersError(f"episodes must be a positive integer, got {episodes!r}")
    run = RunDirectory(run_dir)
    model, config, step = load_policy(run.path / POLICY_FILE)
    with (closing(make_vec_env(config.env_id, min(config.n_eval_envs, episodes), fire_reset=config.fire_reset)) as env,
          tqdm(total=episodes, desc="episodes", unit="episode", disable=not show_progress) as bar):
        returns, _ = evaluate_policy(model, env, episodes, REPLAY_SEED_OFFSET + seed, torch.device("cpu"),
                                     on_episode=bar.update, greedy=greedy)
    last = (read_run(run.path) or RunRecord(run.path.name)).last
    last_mean, last_sem = (last.mean, last.sem) if last is not None else (None, None)
    return Rescore(returns, *mean_and_sem(returns), last_mean, last_sem, step, seed, greedy)


def rescore_path(run_dir: str | Path, greedy: bool = False) -> Path:
    """Where ``save_rescore`` keeps a run's re-score of sampled actions, or of ``greedy`` ones."""
    return Path(run_dir) / (GREEDY_RESCORE_FILE if greedy else RESCORE_FILE)


def save_rescore(run_dir: str | Path, rescore: Rescore) -> Path | None:
    """Write ``rescore`` (with its verdict, ``consistent``) to ``<run_dir>/policy_rescore.json``, unless
    that file holds a re-score of the same policy step over more episodes: a quick check does not replace
    a longer one. The path written, or None if the saved re-score was kept."""
    saved = read_rescore(run_dir, rescore.greedy)
    if saved is not None and saved.step == rescore.step and len(saved.returns) > len(rescore.returns):
        return None
    path = rescore_path(run_dir, rescore.greedy)
    record = {**asdict(rescore), "consistent": rescore.consistent}
    write_atomically(path, (json.dumps(record, indent=1) + "\n").encode())
    return path


def read_rescore(run_dir: str | Path, greedy: bool = False) -> Rescore | None:
    """The re-score (``greedy``: of greedy actions) saved by ``save_rescore`` in ``run_dir``, or None if there is
    none."""
    path = rescore_path(run_dir, greedy)
    if not path.is_file():
        return None
    saved = json.loads(path.read_text())
    saved.pop("consistent")
    return Rescore(**saved)


def _frame(obs: np.ndarray, score: tuple[int, int], scale: int) -> np.ndarray:
    """The newest grey frame of a stack, enlarged, with the score written above it."""
    image = Image.fromarray(obs[-1]).resize((obs.shape[-1] * scale, obs.shape[-2] * scale), Image.Resampling.NEAREST)
    canvas = Image.new("L", (image.width, image.height + 14), color=0)
    canvas.paste(image, (0, 14))
    ImageDraw.Draw(canvas).text((3, 1), f"points won {score[0]}, lost {score[1]}", fill=255)
    return np.asarray(canvas)


def record_video(run_dir: str | Path, path: str | Path, seed: int = 0, scale: int = 2,
                 max_steps: int = 27_000) -> dict[str, Any]:
    """Play one episode of ``<run_dir>/policy.pt`` with sampled actions into an animated GIF at ``path``.

    Frames are the agent's own 84x84 observations (every other step, shown at 30 frames/s of game
    time), with the points won and lost so far. Raises, and deletes the file, if it exceeds 2 MB.
    """
    model, config, _ = load_policy(Path(run_dir) / POLICY_FILE)
    frames, score, total = [], [0, 0], 0.0
    with closing(make_vec_env(config.env_id, 1, fire_reset=config.fire_reset)) as env:
        obs, _ = env.reset(seed=REPLAY_SEED_OFFSET + seed)
        for step in range(max_steps):
            if step % 2 == 0:
                frames.append(_frame(obs[0], (score[0], score[1]), scale))
            with torch.inference_mode():
                action = sample_actions(model(torch.as_tensor(obs))[0])
            obs, reward, terminated, truncated, info = env.step(action.numpy())
            total += float(reward[0])
            if reward[0] != 0:  # points won, or lost (Pong's -1 when the opponent scores)
                score[0 if reward[0] > 0 else 1] += 1
            if terminated[0] or truncated[0]:
                frames.append(_frame(info["final_obs"][0], (score[0], score[1]), scale))
                break
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(path, np.stack(frames), extension=".gif", duration=66, loop=0)
    size = path.stat().st_size
    if size > MAX_VIDEO_BYTES:
        path.unlink()  # an oversized GIF left behind would be embedded by the report as if it were fine
        raise RLHelpersError(f"{path} is {size:,} bytes, over the {MAX_VIDEO_BYTES:,} allowed; record it with a "
                             "smaller scale (--video-scale)")
    return {"path": str(path), "score": total, "frames": len(frames), "bytes": size}
