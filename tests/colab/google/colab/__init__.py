"""Stand-in for Colab's ``google.colab`` (tests only; see tests/colab/README.md)."""

import os


def log(event: str) -> None:
    """Append ``event`` to the file named by ``COLAB_STANDIN_LOG``, if any."""
    if os.environ.get("COLAB_STANDIN_LOG"):
        with open(os.environ["COLAB_STANDIN_LOG"], "a") as f:
            f.write(event + "\n")
