"""Shared test set-up: W&B never reaches a server and writes into a temporary directory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import wandb


@pytest.fixture(autouse=True)
def wandb_sandbox(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Point W&B at a fresh temporary directory, silence it and drop any API key from the environment.

    W&B reads its settings once per process, so its global state is torn down around each test.
    """
    wandb.teardown()
    monkeypatch.setenv("WANDB_DIR", str(tmp_path_factory.mktemp("wandb")))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    yield
    wandb.teardown()
