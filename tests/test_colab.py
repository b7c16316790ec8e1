"""The Colab hand-in rehearsed as Colab runs it: a kernel of its own virtualenv, with Colab's versions of the
Jupyter stack and of our dependencies and no rlhelpers, the stand-in ``google.colab`` of tests/colab/, the
notebook run from an empty /content in its own mount namespace with Drive on another filesystem, ``repo_url`` a
bare copy of this checkout. A first runtime trains and is killed (SIGKILL, as a disconnect); a second, on another
host name and with rlhelpers uninstalled, runs all again: it resumes, builds the whole report and exports it.

Needs root (mount namespaces, bind mounts) and the package registry (Colab's versions). Without them it skips,
with the reason; with ``CI`` set it must run, and fails instead."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from allaction.notebook import COMMITTED_FOLDER
from rlhelpers.runner.runlock import RunLock

ROOT = Path(__file__).resolve().parents[1]
STANDIN = ROOT / "tests" / "colab"
CONTENT = Path("/content")  # Colab's working directory; /content/drive is Drive's mount point
# Colab's GPU image (googlecolab/backend-info, pip-freeze.gpu.txt, 2026), where these install on this Python;
# torch as .ci/run installs it (Colab's is 2.11 with CUDA).
COLAB_VERSIONS = {"ipykernel": "6.17.1", "ipython": "7.34.0", "jupyter_client": "7.4.9", "numpy": "2.0.2",
                  "matplotlib": "3.10.0", "gymnasium": "1.3.0", "ale-py": "0.12.0", "wandb": "0.27.0",
                  "nbconvert": "7.17.1", "torch": "2.13.0"}
KEPT = ("ipykernel", "ipython", "jupyter-client", "numpy", "matplotlib", "torch")  # the set-up must not upgrade
RUN = "a2c_seed-0"
EVAL_INTERVAL, TOTAL = 10_000, 40_000  # evaluations seconds apart, with timed checkpoints (1 s) between
PARAMS = ["-p", "algo", "a2c", "-p", "seed", "0", "-p", "env_id", "CartPole-v1", "-p", "n_envs", "4",
          "-p", "n_eval_episodes", "4", "-p", "eval_interval", str(EVAL_INTERVAL), "-p", "stop_return", "1000",
          "-p", "total_timesteps", str(TOTAL), "-p", "checkpoint_interval_s", "1", "-p", "wandb_mode", "offline"]
KEY = "standin0" * 5  # the W&B key of the second runtime's secret: it must be printed nowhere
# Sections whose figures the hand-in lacked on Colab when only the package was installed.
SECTIONS_WITH_FIGURES = ("What the runs show", "Every prediction", "A.4 Training diagnostics", "A.5 The trained agents",
                         "The first:", "Predictions 1–3", "Predictions 4–6", "Predictions 7–10")


def _cannot_rehearse() -> str | None:
    """Why the rehearsal cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root for mount namespaces and bind mounts"
    if shutil.which("unshare") is None or shutil.which("git") is None:
        return "needs unshare and git"
    probe = subprocess.run(["unshare", "--mount", "--uts", "true"], capture_output=True, text=True)
    return f"unshare --mount --uts is not allowed here: {probe.stderr.strip()}" if probe.returncode else None


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _versions(venv: Path) -> dict[str, str]:
    listed = subprocess.run([_venv_python(venv), "-m", "pip", "list", "--format", "json"], capture_output=True,
                            text=True, check=True).stdout
    return {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(listed)}


@pytest.fixture(scope="module")
def colab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Colab's runtime as files: its virtualenv and kernel spec, the stand-in's start-up file, Drive's folder
    (under /dev/shm: another filesystem than /content's) and ``repo_url``'s bare repository."""
    reason = _cannot_rehearse()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the Colab rehearsal must run in CI: {reason}")
        pytest.skip(reason)
    home = tmp_path_factory.mktemp("colab")
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    pip: list[str | Path] = [_venv_python(venv), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                             "--no-compile"]
    subprocess.run([*pip, *(f"{name}=={version}" for name, version in COLAB_VERSIONS.items())], check=True,
                   timeout=600)
    kernel = home / "jupyter" / "kernels" / "colab"
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [str(_venv_python(venv)), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Colab stand-in", "language": "python"}))
    startup = home / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-colab.py").write_text("import google.colab  # as Colab's kernel does at start-up\n")
    repo = home / "repo.git"
    # Not shallow: pip's blob-less clone of a shallow repository fetches its missing blobs without end.
    subprocess.run(["git", "clone", "--quiet", "--bare", ROOT, repo], check=True)
    subprocess.run(["git", "-C", repo, "config", "uploadpack.allowFilter", "true"], check=True)  # partial fetches
    drive = Path(f"/dev/shm/rlhelpers-drive-{os.getpid()}")
    drive.mkdir()
    made_content = not CONTENT.exists()
    CONTENT.mkdir(exist_ok=True)  # the mount point of each runtime's own empty /content
    yield {"home": home, "venv": venv, "repo": repo, "drive": drive}
    shutil.rmtree(drive, ignore_errors=True)
    if made_content:
        CONTENT.rmdir()


def _runtime(colab: dict[str, Path], name: str, out: Path, secrets: dict[str, str]) -> subprocess.Popen:
    """Start ``papermill`` on the notebook as one Colab runtime, host ``name``: its own mount namespace and host
    name, an empty /content (a bind of a fresh folder, kept for the test to read) as the working directory."""
    content = colab["home"] / name
    content.mkdir()
    (colab["home"] / f"{name}-secrets.json").write_text(json.dumps(secrets))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "RLHELPERS_", "PYTHON", "MPL"))}
    env.update({"PYTHONPATH": str(STANDIN), "IPYTHONDIR": str(colab["home"] / "ipython"),
                "JUPYTER_PATH": str(colab["home"] / "jupyter"), "COLAB_STANDIN_DRIVE": str(colab["drive"]),
                "COLAB_STANDIN_SECRETS": str(colab["home"] / f"{name}-secrets.json"),
                "COLAB_STANDIN_LOG": str(colab["home"] / f"{name}.log"), "OMP_NUM_THREADS": "1",
                "WANDB_DIR": str(content)})
    papermill = [sys.executable, "-m", "papermill", str(ROOT / "report.ipynb"), str(out), "-k", "colab",
                 "-p", "repo_url", _url(colab), *PARAMS]
    script = f'mount --bind "$0" {CONTENT} && hostname {name} && cd {CONTENT} && exec "$@"'
    with open(colab["home"] / f"{name}.out", "w") as log:  # a file, not a pipe that could fill and block it
        return subprocess.Popen(["unshare", "--mount", "--uts", "sh", "-c", script, str(content), *papermill],
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _url(colab: dict[str, Path]) -> str:
    """``repo_url``: the bare repository, with a host, which pip before 24 requires of a ``name @ git+file:`` URL."""
    return f"file://localhost{colab['repo']}"


def _output(colab: dict[str, Path], name: str) -> str:
    """The end of what papermill printed for the runtime ``name``."""
    return (colab["home"] / f"{name}.out").read_text()[-4000:]


def _run_dir(colab: dict[str, Path]) -> Path:
    return colab["drive"] / "MyDrive" / "rlhelpers" / "runs" / RUN


def _history(colab: dict[str, Path]) -> dict:
    return json.loads((_run_dir(colab) / "eval_history.json").read_text())


def _timed_checkpoint_after_an_evaluation(colab: dict[str, Path]) -> int | None:
    """The step of a checkpoint later than the last evaluation, once the run has evaluated after step 0."""
    try:
        last = _history(colab)["history"][-1]["step"]
    except (OSError, ValueError, KeyError, IndexError):
        return None
    steps = [int(p.stem.split("-")[1]) for p in _run_dir(colab).glob("checkpoint-*.pt")]
    later = [step for step in steps if step > last]
    return max(later) if last >= EVAL_INTERVAL and later and last < TOTAL - EVAL_INTERVAL else None


def _text(nb: nbformat.NotebookNode) -> str:
    parts = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            parts.append(o.get("text") or o.get("data", {}).get("text/markdown") or o.get("data", {}).get(
                "text/plain", ""))
    return "\n".join(parts)


def _section(html: str, title: str) -> str:
    """The HTML from the heading (level 1 to 3) that starts with ``title`` to the next heading of its level or
    above."""
    start = re.search(rf"<h([123])[^>]*>{re.escape(title)}", html)
    assert start, f"no section {title!r}"
    end = re.compile(rf"<h[1-{start[1]}][ >]").search(html, start.end())
    return html[start.start(): end.start() if end else len(html)]


def test_the_colab_hand_in_survives_a_disconnect_and_shows_the_committed_runs(colab: dict[str, Path]) -> None:
    started = time.monotonic()
    before_versions = _versions(colab["venv"])
    assert "rlhelpers" not in before_versions

    # The first runtime: no W&B secret; killed as a disconnect once a timed checkpoint follows an evaluation.
    first = _runtime(colab, "colab-vm-1", colab["home"] / "first.ipynb", secrets={})
    try:
        deadline = time.monotonic() + 300
        while (killed_at := _timed_checkpoint_after_an_evaluation(colab)) is None:
            assert first.poll() is None, "the first runtime ended before the kill: " + _output(colab, "colab-vm-1")
            assert time.monotonic() < deadline, "no timed checkpoint after an evaluation within 300 s"
            time.sleep(0.05)
        os.kill(json.loads((_run_dir(colab) / "owner.json").read_text())["pid"], signal.SIGKILL)  # the kernel
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    before = _history(colab)
    evaluated = [point["step"] for point in before["history"]]
    assert evaluated[-1] < killed_at < TOTAL, "the kill fell after a timed checkpoint, between evaluations"
    # The new runtime comes minutes later, once the dead VM's heartbeat is stale (RunLock.stale_after_s old).
    lock = _run_dir(colab) / "owner.json"
    owner = json.loads(lock.read_text())
    lock.write_text(json.dumps({**owner, "heartbeat": owner["heartbeat"] - RunLock.stale_after_s}))
    assert (colab["home"] / "colab-vm-1.log").read_text().splitlines()[:2] == [
        "mount /content/drive", "userdata.get WANDB_API_KEY"]
    first_text = _text(nbformat.read(colab["home"] / "first.ipynb", as_version=4))
    assert "W&B: OFFLINE (no API key found)" in first_text and "Colab secret WANDB_API_KEY not available" in first_text

    # A new runtime on another machine: rlhelpers gone, the W&B secret added; Run all again.
    subprocess.run([_venv_python(colab["venv"]), "-m", "pip", "uninstall", "--quiet", "--yes", "rlhelpers"],
                   check=True)
    second = _runtime(colab, "colab-vm-2", colab["home"] / "second.ipynb", secrets={"WANDB_API_KEY": KEY})
    second.wait(timeout=600)
    output = (colab["home"] / "colab-vm-2.out").read_text()
    assert second.returncode == 0, output[-4000:]
    nb = nbformat.read(colab["home"] / "second.ipynb", as_version=4)
    text = _text(nb)

    # rlhelpers came from repo_url into the runtime's own site-packages, and Colab's stack was kept.
    after_versions = _versions(colab["venv"])
    assert all(after_versions[name] == before_versions[name] for name in KEPT), {
        name: (before_versions[name], after_versions[name]) for name in KEPT}
    direct = next((colab["venv"] / "lib").glob("python*/site-packages/rlhelpers-*.dist-info/direct_url.json"))
    assert json.loads(direct.read_text())["url"] == _url(colab)
    fetched = colab["home"] / "colab-vm-2" / COMMITTED_FOLDER
    # Exactly the committed runs' and figures' files but the .pt ones (policies, checkpoints): the histories,
    # metrics and figures the report reads, which grow with every campaign, and nothing else.
    listed = subprocess.run(["git", "-C", colab["repo"], "ls-tree", "-r", "--name-only", "HEAD", "runs", "figures"],
                            check=True, capture_output=True, text=True).stdout.split()
    files = {p.relative_to(fetched).as_posix() for p in fetched.rglob("*") if p.is_file()}
    assert files == {name for name in listed if not name.endswith(".pt")} and any(n.endswith(".pt") for n in listed)
    assert len(list((fetched / "runs").glob("*_seed-*"))) >= 20

    # The run resumed from the checkpoint after its last evaluation, with the same W&B run, and finished.
    assert f"{RUN}: resuming from step {killed_at:,} on " in text
    assert re.search(rf"^taking over run {RUN} from dead owner \(host colab-vm-1, pid \d+, last heartbeat \d+ s ago\)$",
                     text, re.M)
    assert "UserWarning" not in text and "runlock.py" not in text and "\x1b[" not in text  # nor W&B's coloured notes
    after = _history(colab)
    steps = [point["step"] for point in after["history"]]
    assert steps == list(range(0, TOTAL + 1, EVAL_INTERVAL)) and after["history"][: len(evaluated)] == before["history"]
    assert after["wandb_run_id"] == before["wandb_run_id"]
    assert any(p.name.startswith("checkpoint-") for p in _run_dir(colab).iterdir())

    # The key reached W&B's environment (no "no API key found") and is printed nowhere.
    assert "W&B: OFFLINE. Nothing is uploaded" in text
    assert (colab["home"] / "colab-vm-2.log").read_text().splitlines()[-1] == "flush_and_unmount"
    assert "Google Drive flushed and unmounted" in text

    # The hand-in exports in that runtime, with nbconvert's HTML and the README's html_mathml.
    for to, name in (("html", "plain"), ("html_mathml", "graders")):
        export = subprocess.run([_venv_python(colab["venv"]), "-m", "jupyter", "nbconvert", "--to", to, "--no-input",
                                 "--output", name, "second.ipynb"], cwd=colab["home"], capture_output=True, text=True,
                                timeout=180)
        assert export.returncode == 0, export.stderr[-3000:]
    html = (colab["home"] / "graders.html").read_text()
    for shown in (output, html, (colab["home"] / "plain.html").read_text(), json.dumps(nb)):
        assert KEY not in shown
    assert "not in this checkout" not in html and "could not be checked" not in html
    held = re.search(r"<strong>(\d+) of the (\d+) figures checked hold on the runs in <code>(.+?)</code>", html)
    assert held and held[1] == held[2] and int(held[1]) >= 100 and held[3] == f"{COMMITTED_FOLDER}/runs"
    for title in SECTIONS_WITH_FIGURES:
        assert "<img" in _section(html, title), f"no figure in {title}"
    last = after["history"][-1]["returns"]
    assert f"{sum(last) / len(last):.2f} ±" in _section(html, "Results")  # the table below the plot
    student = _section(html, "Your analysis")
    assert "Your own words (the assignment asks for them)" in student
    headings = [title.strip() for title in re.findall(r"<h2[^>]*>([^<¶]+)", html)]
    assert headings[headings.index("Results") + 1] == "Your analysis"  # where a grader reads it
    method = _section(html, "Method")  # the formulas, then the code the trainer runs
    assert all(name in method for name in ("a2c_loss", "task1_loss", "task2_loss", "ALGORITHMS", "returns"))
    print(f"Colab rehearsal: {time.monotonic() - started:.0f} s; killed at step {killed_at:,} after evaluations "
          f"{evaluated}; resumed to {steps}; sessions start at {[p['start_step'] for p in after['provenance']]}")
