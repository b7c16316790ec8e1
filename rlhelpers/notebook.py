"""What ``report.ipynb`` needs before it trains: its parameters checked and turned into a run's config, where
the runs live and how W&B is set up. On Colab the runs go to a Google Drive folder and the key comes from a
Colab secret; elsewhere, ``runs`` and the key of the environment or ``wandb login``.

Colab-only code is confined to ``_colab_drive`` and ``_colab_secret``; everything else runs, and is tested,
on any machine.
"""

from __future__ import annotations

import ast
import difflib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from rlhelpers.core.errors import RLHelpersError
from rlhelpers.core.losses import ALGORITHMS
from rlhelpers.report.experiment import BREAKOUT, PONG, Experiment
from rlhelpers.runner.campaign import campaign_runs, check_options
from rlhelpers.runner.config import DEFAULT_RUNS_DIR, TrainConfig, check_choice, validate
from rlhelpers.runner.store import run_dirs
from rlhelpers.runner.tracking import WANDB_KEY, resolve_wandb_mode, upload_notice

REPORT_ONLY = "none"
ALL_RUNS = "all"
# The names of report.ipynb's parameters cell.
NOTEBOOK_PARAMETERS = ("algo", "seed", "env_id", "total_timesteps", "n_envs", "eval_interval", "n_eval_episodes",
                       "stop_return", "checkpoint_interval_s", "runs_dir", "wandb_project", "wandb_entity",
                       "wandb_mode", "recompute_analysis", "device", "repo_url")
COLAB_DRIVE = "/content/drive"
COLAB_RUNS_DIR = f"{COLAB_DRIVE}/MyDrive/rlhelpers/runs"
COMMITTED_FOLDER = "rlhelpers-committed"  # where a notebook outside a clone fetches the committed runs
COMMITTED_PATHS = ("/runs/", "/figures/", "!*.pt")  # what it fetches (sparse-checkout patterns): no .pt files


def on_colab() -> bool:
    """True inside a Google Colab notebook (its kernel imports ``google.colab`` at start-up)."""
    return "google.colab" in sys.modules


def _colab_drive() -> Any:
    """Colab's Google Drive module: ``mount`` (asks the user for permission in the Colab UI) and
    ``flush_and_unmount``."""
    from google.colab import drive

    return drive


def _colab_secret(name: str) -> str | None:
    """A Colab secret's value, or None when it is missing or the notebook may not read it."""
    from google.colab import userdata

    try:
        return userdata.get(name)
    except Exception as exc:  # SecretNotFoundError, NotebookAccessError, or no Colab UI (e.g. under papermill)
        print(f"Colab secret {name} not available ({type(exc).__name__})")
        return None


def _on_drive(runs_dir: str) -> bool:
    return on_colab() and str(runs_dir).startswith(COLAB_DRIVE)


def resolve_runs_dir(runs_dir: str | None) -> str:
    """``runs_dir`` when given; otherwise a Google Drive folder on Colab and ``runs`` elsewhere.

    On Colab, Drive is mounted whenever the runs directory lies on it.
    """
    if not runs_dir:
        runs_dir = COLAB_RUNS_DIR if on_colab() else DEFAULT_RUNS_DIR
    if _on_drive(runs_dir):
        _colab_drive().mount(COLAB_DRIVE)
    return str(runs_dir)


def require_drive(runs_dir: str) -> None:
    """On Colab with the runs on Google Drive, raise ``RLHelpersError`` unless Drive is mounted: after the
    last cell unmounts it, a rerun training cell would otherwise write to the VM's own disk."""
    if _on_drive(runs_dir) and not os.path.ismount(COLAB_DRIVE):
        raise RLHelpersError(f"Google Drive is not mounted (the notebook's last cell unmounts it), so {runs_dir} "
                             "is not on Drive now: rerun the set-up cell first, or Run all")


def flush_drive(runs_dir: str) -> None:
    """On Colab with the runs on Google Drive: flush and unmount Drive, so that the last checkpoint and
    history reach it before the runtime is deleted (Drive uploads in the background). Elsewhere nothing."""
    if _on_drive(runs_dir) and os.path.ismount(COLAB_DRIVE):
        _colab_drive().flush_and_unmount()  # writes everything pending to Drive first
        print(f"Google Drive flushed and unmounted: {runs_dir} is complete on Drive. Run all again to mount it again.")


def setup_wandb(mode: str | None, runs_dir: str = DEFAULT_RUNS_DIR) -> str:
    """Choose the W&B mode and say which one is used.

    On Colab the secret ``WANDB_API_KEY`` is copied into the environment (child processes inherit
    it). ``mode`` None means online with a key and offline without one; an explicit ``online``
    without a key is refused with an ``RLHelpersError`` instead of W&B's prompt. Without uploads the
    message says how to publish the runs of ``runs_dir`` later.
    """
    if on_colab() and not os.environ.get(WANDB_KEY) and (key := _colab_secret(WANDB_KEY)):
        os.environ[WANDB_KEY] = key
    resolved = resolve_wandb_mode(mode)
    print("W&B: online" if resolved == "online" else upload_notice(resolved, runs_dir, on_colab(), _on_drive(runs_dir)))
    return resolved


def check_parameters(executed_cells: list[str], recompute_analysis: object) -> None:
    """Stop on what papermill lets through: a ``-p`` name that is not one of ``NOTEBOOK_PARAMETERS``
    (papermill only warns, and the default stays in force) and text for the ``recompute_analysis`` flag
    (``-r`` passes text, and any text is true). ``executed_cells`` are the kernel's cell sources (IPython's
    ``In``); papermill's injected cell is the one that starts with ``# Parameters``."""
    for source in (cell for cell in executed_cells if cell.startswith("# Parameters\n")):
        for node in ast.parse(source).body:
            for target in getattr(node, "targets", []):
                if (isinstance(target, ast.Name) and target.id not in NOTEBOOK_PARAMETERS
                        and not target.id.startswith("PAPERMILL_")):  # --inject-paths adds these
                    close = difflib.get_close_matches(target.id, NOTEBOOK_PARAMETERS, n=1)
                    raise RLHelpersError(f"unknown parameter {target.id!r}"
                                         + (f": did you mean {close[0]!r}?" if close else "")
                                         + f" The parameters are {', '.join(NOTEBOOK_PARAMETERS)}")
    if not isinstance(recompute_analysis, bool):
        raise RLHelpersError(f"recompute_analysis must be True or False, got {recompute_analysis!r} "
                             "(papermill's -r passes text: use -p)")


def run_options(experiment: Experiment | None, **params: Any) -> dict[str, Any]:
    """The options every run of the notebook shares (``TrainConfig`` fields): the report experiment's on the
    game (its settings and target), overridden by the parameters that are not None, with the W&B project
    resolved (the notebook links it)."""
    options = {**(experiment.options() if experiment else {}),
               **{name: value for name, value in params.items() if value is not None}}
    return {**options, "wandb_project": TrainConfig(**options).wandb_project}


def report_runs(experiment: Experiment | None) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The arms and seeds that ``algo = "all"`` trains: the experiment's, and on a game without one the Pong
    experiment's."""
    return (experiment or PONG).arms, (experiment or PONG).seeds


def run_config(algo: str, experiment: Experiment | None, **options: Any) -> TrainConfig | None:
    """The validated ``TrainConfig`` of the run to train (``options``: ``TrainConfig`` fields); None for
    ``algo='none'`` (report only) and for ``'all'``, every unfinished run of ``report_runs`` (trained by
    ``campaign.train_campaign``), whose options are checked here for every run (``campaign.check_options``)."""
    if algo == ALL_RUNS:
        check_options(options, campaign_runs(*report_runs(experiment)))
    if algo in (ALL_RUNS, REPORT_ONLY):
        return None
    check_choice("algo", algo, ALGORITHMS, f", {ALL_RUNS!r} to train every run of the report, or {REPORT_ONLY!r} to "
                 "only build the report from the runs present")
    return validate(TrainConfig(algo=algo, **options))


def committed_root(repo_url: str) -> Path:
    """The folder holding the committed ``runs/`` and ``figures/`` that the written analysis is about: the working
    directory in a clone of the repository. Without one (Colab installs the package, not the repository), a
    shallow, sparse, blob-less fetch of just those two folders from ``repo_url`` (about 15 MB: histories, metrics
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


def show_errors_briefly(shell: Any) -> None:
    """Show the package's own errors (``RLHelpersError``: a mistaken parameter, a run another process trains) in
    the IPython ``shell`` as their one-line message, which says what to change; any other exception keeps its
    traceback."""
    def one_line(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> list[str]:
        shown = [f"{etype.__name__}: {value}"]
        shell._showtraceback(etype, value, shown)  # IPython leaves showing it to the handler (7.x to 9.x)
        return shown

    shell.set_custom_exc((RLHelpersError,), one_line)
