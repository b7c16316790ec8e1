"""Shared test set-up: one torch thread per test process, W&B never reaches a server and writes into a temporary
directory, and the figures a test draws are closed after it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

# The tests run in one pytest-xdist worker per core. With torch's default of one thread per core in each
# worker, the threads outnumbered the cores and the suite took 763 s instead of 704 s serially; the
# variable also reaches the subprocesses that tests start.
os.environ["OMP_NUM_THREADS"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

try:
    import wandb
    HAVE_WANDB = True
except ImportError:  # a GPU machine's check (bench/gpu_check.sh) carries only what its tests need: no W&B
    HAVE_WANDB = False

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def wandb_sandbox(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Point W&B at a fresh temporary directory, silence it and hide any API key (environment or netrc login).

    W&B reads its settings once per process, so its global state is torn down around each test.
    """
    if HAVE_WANDB:
        wandb.teardown()
    monkeypatch.setenv("WANDB_DIR", str(tmp_path_factory.mktemp("wandb")))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path_factory.getbasetemp() / "no-netrc"))
    monkeypatch.delenv("WANDB_MODE", raising=False)
    yield
    if HAVE_WANDB:
        wandb.teardown()


@pytest.fixture(autouse=True)
def close_figures() -> Iterator[None]:
    """Close every figure a test drew: pyplot holds each one (and its memory) until it is closed."""
    yield
    if "matplotlib.pyplot" in sys.modules:  # only where the test drew with it
        sys.modules["matplotlib.pyplot"].close("all")
