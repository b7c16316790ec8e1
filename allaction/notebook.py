"""What ``report.ipynb`` needs of the study before it trains: its parameters, the run's config (the report's
experiment on the game, ``algo = "all"`` for every run of it), and which runs the report shows (the committed runs,
fetched where the notebook runs outside a clone). The Colab, Drive and W&B glue any notebook needs is the helper's
(``rlhelpers.notebook``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from allaction.experiment import BREAKOUT, PONG, Experiment, study_runs
from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.losses import ALGORITHMS
from rlhelpers.runner.campaign import CampaignRun, check_options
from rlhelpers.runner.config import TrainConfig, check_choice, validate
from rlhelpers.runner.store import run_dirs

REPORT_ONLY = "none"
ALL_RUNS = "all"
# The names of report.ipynb's parameters cell.
NOTEBOOK_PARAMETERS = ("algo", "seed", "env_id", "total_timesteps", "n_envs", "eval_interval", "n_eval_episodes",
                       "stop_return", "checkpoint_interval_s", "runs_dir", "wandb_project", "wandb_entity",
                       "wandb_mode", "recompute_analysis", "device", "repo_url")
COMMITTED_FOLDER = "rlhelpers-committed"  # where a notebook outside a clone fetches the committed runs
COMMITTED_PATHS = ("/runs/", "/figures/", "!*.pt")  # what it fetches (sparse-checkout patterns): no .pt files


def run_options(experiment: Experiment | None, **params: Any) -> dict[str, Any]:
    """The options every run of the notebook shares (``TrainConfig`` fields): the report experiment's on the
    game (its settings and target), overridden by the parameters that are not None, with the W&B project
    resolved (the notebook links it)."""
    options = {**(experiment.options() if experiment else {}),
               **{name: value for name, value in params.items() if value is not None}}
    return {**options, "wandb_project": TrainConfig(**options).wandb_project}


def report_runs(experiment: Experiment | None) -> list[CampaignRun]:
    """The runs that ``algo = "all"`` trains: the experiment's arms and seeds, and on a game without one the Pong
    experiment's."""
    return study_runs((experiment or PONG).arms, (experiment or PONG).seeds)


def run_config(algo: str, experiment: Experiment | None, **options: Any) -> TrainConfig | None:
    """The validated ``TrainConfig`` of the run to train (``options``: ``TrainConfig`` fields); None for
    ``algo='none'`` (report only) and for ``'all'``, every unfinished run of ``report_runs`` (trained by
    ``campaign.train_campaign``), whose options are checked here for every run (``campaign.check_options``)."""
    if algo == ALL_RUNS:
        check_options(options, report_runs(experiment))
    if algo in (ALL_RUNS, REPORT_ONLY):
        return None
    check_choice("algo", algo, ALGORITHMS, f", {ALL_RUNS!r} to train every run of the report, or {REPORT_ONLY!r} to "
                 "only build the report from the runs present")
    return validate(TrainConfig(algo=algo, **options))


def committed_root(repo_url: str) -> Path:
    """The folder holding the committed ``runs/`` and ``figures/`` that the written analysis is about: the working
    directory in a clone of the repository. Without one (Colab installs the package, not the repository), a
    shallow, sparse, blob-less fetch of just those two folders from ``repo_url`` (about 21 MB: histories, metrics
    and figures, no policies or checkpoints) into ``COMMITTED_FOLDER``, made once per machine. A ``repo_url`` that
    ends in ``@<commit>`` (or a branch or tag), as pip takes it, fetches that commit's."""
    root = Path(COMMITTED_FOLDER)
    if run_dirs(PONG.runs_dir) or not repo_url:
        return Path(".")
    if not run_dirs(root / PONG.runs_dir):
        print(f"Fetching the committed runs' histories and figures from {repo_url} into {root.resolve()}")
        shutil.rmtree(root, ignore_errors=True)
        head, _, last = repo_url.rpartition("/")
        name, _, revision = last.partition("@")
        in_root = ["-C", str(root)]
        for command in (["init", "--quiet", str(root)], [*in_root, "remote", "add", "origin", f"{head}/{name}"],
                        [*in_root, "sparse-checkout", "set", "--no-cone", *COMMITTED_PATHS],
                        [*in_root, "fetch", "--quiet", "--depth", "1", "--filter=blob:none", "origin",
                         revision or "HEAD"],
                        [*in_root, "checkout", "--quiet", "FETCH_HEAD"]):
            done = subprocess.run(["git", *command], capture_output=True, text=True)
            if done.returncode != 0:
                what = command[2] if command[0] == "-C" else command[0]
                raise RLHelpersError(f"cannot fetch the committed runs from {repo_url}: git {what} said "
                                     f"{(done.stderr.strip() or str(done.returncode)).splitlines()[0]}; check "
                                     "repo_url")
        shutil.rmtree(root / ".git")  # the files are all the report reads
    return root


def shows_committed(env_id: str, runs_dir: str) -> bool:
    """Whether the report shows the committed runs of the Pong experiment (its game, its runs directory)."""
    return env_id == PONG.env_id and Path(runs_dir).resolve() == Path(PONG.runs_dir).resolve()


def scope_markdown(env_id: str, runs_dir: str, root: Path = Path(".")) -> str:
    """Which runs the report shows, said once at its top: the committed experiment, your own runs of it beside
    the committed ones (in ``root``, see ``committed_root``), or another game's runs, after which the written
    analysis is the committed runs'."""
    pong, breakout = f"`{root / PONG.runs_dir}/`", f"`{root / BREAKOUT.runs_dir}/`"
    if shows_committed(env_id, runs_dir):
        return f"Runs shown: the committed Pong runs in {pong} and Breakout runs in {breakout}."
    here = "" if run_dirs(root / PONG.runs_dir) else (
        f" They are not here ({pong} holds none): set `repo_url` to fetch them, or clone the repository.")
    if env_id == PONG.env_id:
        return (f"This report shows your runs in `{runs_dir}`: the results plot draws them beside the committed runs "
                "(dashed), the table below it lists yours, *Your runs against the text* says which of the "
                "text's figures they reproduce, and *Your analysis* is yours to write. The written analysis is about "
                f"the committed runs in {pong}.{here}")
    return (f"This report shows your runs of `{env_id}` in `{runs_dir}` under *Training* and *Results* (the plot "
            f"and its table). Every other section is about the committed runs (Pong's in {pong}, "
            f"Breakout's in {breakout}), not yours.{here}")
