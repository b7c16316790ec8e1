"""Reading offline W&B runs back, for tests: the records of an ``offline-run-*`` folder's ``.wandb`` file."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2

# wandb's protobuf modules make their message classes at import time and come without stubs, so mypy sees none of
# them: the records are typed Any here (wandb_internal_pb2.Record and .RunRecord at run time).
Record = Any
RunRecord = Any


def wandb_records(path: Path) -> list[Record]:
    """Records of an offline ``.wandb`` file (a LevelDB-style log of 32 KiB blocks after a 7-byte header)."""
    data = path.read_bytes()
    records: list[Record] = []
    chunks, pos, block = b"", 7, 32768
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # block trailer padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:
            pos += block - pos % block
            continue
        chunks += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST fragment
            record = wandb_internal_pb2.Record()  # type: ignore[attr-defined]  # no stubs: see Record above
            record.ParseFromString(chunks)
            records.append(record)
            chunks = b""
    return records


def run_records(run_dir: Path) -> list[Record]:
    """Records of one offline W&B run directory (``offline-run-<time>-<id>``)."""
    return wandb_records(next(run_dir.glob("*.wandb")))


def history_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Every history row logged to one offline W&B run directory, its values decoded from JSON."""
    return [{item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            for record in run_records(run_dir) if record.WhichOneof("record_type") == "history"]
