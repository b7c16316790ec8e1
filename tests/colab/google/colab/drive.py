"""Stand-in for ``google.colab.drive``: Google Drive is the folder ``$COLAB_STANDIN_DRIVE``, bind-mounted."""

import os
import subprocess

from google.colab import log

_MOUNTED: list[str] = []


def mount(mountpoint: str, force_remount: bool = False, timeout_ms: int = 120_000, readonly: bool = False) -> None:
    """Bind-mount the stand-in Drive onto ``mountpoint``, as Colab's FUSE mount (it holds ``MyDrive``)."""
    log(f"mount {mountpoint}")
    if os.path.ismount(mountpoint) and not force_remount:
        print(f"Drive already mounted at {mountpoint}; to attempt to forcibly remount, call "
              f"drive.mount(\"{mountpoint}\", force_remount=True).")
        return
    source = os.environ["COLAB_STANDIN_DRIVE"]
    os.makedirs(os.path.join(source, "MyDrive"), exist_ok=True)
    os.makedirs(mountpoint, exist_ok=True)
    subprocess.run(["mount", "--bind", source, mountpoint], check=True)
    _MOUNTED.append(mountpoint)
    print(f"Mounted at {mountpoint}")


def flush_and_unmount(timeout_ms: int = 86_400_000) -> None:
    """Unmount the stand-in Drive (a bind mount has nothing to flush)."""
    log("flush_and_unmount")
    for mountpoint in _MOUNTED:
        subprocess.run(["umount", mountpoint], check=True)
    _MOUNTED.clear()
