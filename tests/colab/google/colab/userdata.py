"""Stand-in for ``google.colab.userdata``: the secrets are the JSON object in ``$COLAB_STANDIN_SECRETS``."""

import json
import os

from google.colab import log


class SecretNotFoundError(Exception):
    """The notebook asked for a secret that the user has not added."""


def get(key: str) -> str:
    """The secret ``key``, as Colab's ``userdata.get`` gives it; ``SecretNotFoundError`` when it is missing."""
    log(f"userdata.get {key}")
    path = os.environ.get("COLAB_STANDIN_SECRETS", "")
    secrets = json.loads(open(path).read()) if path and os.path.exists(path) else {}
    if key not in secrets:
        raise SecretNotFoundError(f"Secret {key} does not exist.")
    return secrets[key]
