"""A one-node SLURM cluster on this machine, to try ``campaign --cluster slurm`` and to test it (tests/test_slurm.py).

As root on Debian or Ubuntu, ``python tests/slurm.py`` installs slurm-wlm and munge where they are missing, starts
munged, slurmctld and slurmd with their configuration, sockets and logs in a new temporary directory, says which
``SLURM_CONF`` to export, and stops the three daemons at Ctrl-C or SIGTERM. It leaves the machine's own SLURM and
munge, if any, alone: the daemons use their own ports, munge socket and state.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

PACKAGES = ("slurm-wlm", "munge")
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "sinfo")
MUNGE_KEY = Path("/etc/munge/munge.key")  # created by Debian's munge package
PARTITION = "debug"
# A requeued job waits `cred_expire` seconds before it may start again (slurm.conf(5), AuthInfo; 120 s by default).
REQUEUE_HOLD_S = 5
# The node offers 4 CPUs whatever the machine has, so that the tests' jobs of 1 CPU each run side by side.
NODE_CPUS = 4


class SlurmUnavailable(Exception):
    """SLURM cannot be started here; the message says why."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def install() -> None:
    """Install slurm-wlm and munge with apt-get where a program of theirs is missing (root only), one process at a
    time (pytest-xdist's workers share the machine)."""
    if all(shutil.which(program, path="/usr/sbin:/usr/bin") for program in PROGRAMS) and MUNGE_KEY.exists():
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SlurmUnavailable(f"{' and '.join(PACKAGES)} are not installed, and only root on Debian or Ubuntu can "
                               "install them here (apt-get)")
    with open(Path(tempfile.gettempdir()) / "rlhelpers-slurm-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(shutil.which(program, path="/usr/sbin:/usr/bin") for program in PROGRAMS) and MUNGE_KEY.exists():
            return  # another process installed them meanwhile
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *PACKAGES]):
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise SlurmUnavailable(f"`{' '.join(command)}` failed: {done.stderr.strip()[-500:]}")


def write_config(directory: Path, munge_socket: Path) -> Path:
    """Write a one-node slurm.conf (no accounting, no cgroups) with its state, spool and logs under ``directory``."""
    host = socket.gethostname().split(".")[0]
    conf = directory / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=rlhelpers",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={munge_socket},cred_expire={REQUEUE_HOLD_S}",
        f"StateSaveLocation={directory / 'state'}",
        f"SlurmdSpoolDir={directory / 'spool'}",
        f"SlurmctldPidFile={directory / 'slurmctld.pid'}",
        f"SlurmdPidFile={directory / 'slurmd.pid'}",
        f"SlurmctldLogFile={directory / 'slurmctld.log'}",
        f"SlurmdLogFile={directory / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "MailProg=/bin/true",
        "SlurmdParameters=config_overrides",  # the node has NODE_CPUS CPUs, whatever the machine has
        # The scheduler looks at pending jobs every second, not every 30 to 60 s: a requeued job starts at the end
        # of its hold.
        "SchedulerParameters=sched_interval=1,bf_interval=1",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} RealMemory=4000 State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP",
    ]) + "\n")
    return conf


def _as_munge() -> None:
    """In munged's child before exec: run as the munge user, as its package does."""
    user = pwd.getpwnam("munge")
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)


def _logs(directory: Path) -> str:
    """The last lines of the daemons' logs, for an error message."""
    tails = [f"--- {log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
             for log in sorted(directory.rglob("*.log")) if log.stat().st_size]
    return "\n".join(tails)


def _wait_for_idle_node(env: dict[str, str], daemons: list[subprocess.Popen], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(daemon.poll() is not None for daemon in daemons):
            raise SlurmUnavailable("a SLURM daemon exited at start")
        state = subprocess.run(["sinfo", "--noheader", "--format=%t"], env=env, capture_output=True, text=True,
                               timeout=30).stdout.strip()
        if state == "idle":
            return
        time.sleep(0.5)
    raise SlurmUnavailable(f"the node was not idle within {timeout_s:.0f} s")


def _stop(env: dict[str, str], daemons: list[subprocess.Popen]) -> None:
    """Cancel the cluster's jobs (SLURM ends their processes), then stop the daemons, slurmd first."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["scancel", f"--partition={PARTITION}"], env=env, timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and subprocess.run(
                ["squeue", "--noheader"], env=env, capture_output=True, text=True, timeout=30).stdout.strip():
            time.sleep(0.5)
    for daemon in reversed(daemons):
        daemon.terminate()
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


@contextlib.contextmanager
def one_node_cluster() -> Iterator[dict[str, str]]:
    """Install SLURM where missing, start munged, slurmctld and slurmd in a new temporary directory and wait until
    the node is idle; yield ``os.environ`` with ``SLURM_CONF`` pointing at this cluster's configuration. At the
    end, cancel its jobs, stop exactly the daemons started here and delete the directory.

    Raises ``SlurmUnavailable`` where SLURM cannot start (not root, no apt-get, a daemon that fails)."""
    if os.geteuid() != 0:
        raise SlurmUnavailable("starting SLURM's daemons needs root")
    install()
    # Under /tmp, not pytest's private temporary directory: munged, as the munge user, must reach its own folder.
    directory = Path(tempfile.mkdtemp(prefix="rlhelpers-slurm-"))
    directory.chmod(0o755)
    munge_dir = directory / "munge"
    munge_dir.mkdir()  # 0755: munged wants its socket's folder open to all
    user = pwd.getpwnam("munge")
    os.chown(munge_dir, user.pw_uid, user.pw_gid)
    munge_socket = munge_dir / "munge.socket"
    env = dict(os.environ, SLURM_CONF=str(write_config(directory, munge_socket)))
    daemons: list[subprocess.Popen] = []
    try:
        with open(directory / "munged-stderr.log", "w") as munged_stderr:
            daemons.append(subprocess.Popen(
                ["munged", "--foreground", f"--socket={munge_socket}", f"--key-file={MUNGE_KEY}",
                 f"--pid-file={munge_dir / 'munged.pid'}", f"--log-file={munge_dir / 'munged.log'}",
                 f"--seed-file={munge_dir / 'munged.seed'}"], preexec_fn=_as_munge, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=munged_stderr))
        deadline = time.monotonic() + 30
        while not munge_socket.exists() and time.monotonic() < deadline:
            if daemons[0].poll() is not None:
                raise SlurmUnavailable("munged exited at start")
            time.sleep(0.1)
        for daemon in ("slurmctld", "slurmd"):  # their logs are in `directory`; -D: in the foreground
            daemons.append(subprocess.Popen([daemon, "-D", "-f", env["SLURM_CONF"]], env=env, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for_idle_node(env, daemons, timeout_s=60)
    except (SlurmUnavailable, OSError, subprocess.SubprocessError) as exc:
        _stop(env, daemons)
        message = f"SLURM did not start: {exc}\n{_logs(directory)}"
        shutil.rmtree(directory, ignore_errors=True)
        raise SlurmUnavailable(message) from exc
    try:
        yield env
    finally:
        _stop(env, daemons)
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    for stop in (signal.SIGINT, signal.SIGTERM):  # both stop the cluster, even where SIGINT came ignored
        signal.signal(stop, signal.default_int_handler)
    try:
        with one_node_cluster() as cluster_env:
            print(f"a one-node SLURM is running; in another shell:\n  export SLURM_CONF={cluster_env['SLURM_CONF']}\n"
                  "Ctrl-C or SIGTERM stops it (and cancels its jobs)", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
    except SlurmUnavailable as exc:
        sys.exit(f"error: {exc}")
