"""Hub access: the Hugging Face Hub refusing a model (gated, private, a bad token) reported in one sentence that says
what to do, instead of a chain of HTTP errors. Wrapped around the model and tokenizer loads of training
(trainer.loading.backend) and of the compare panel.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


class ModelAccessError(OSError):
    """The hub refused the model (gated, private, or a bad token); the message says what to do."""


def hub_refusal(exc: BaseException, model: str) -> str | None:
    """A plain-words message when ``exc`` (or what it was raised from) is the hub refusing ``model``, else None.

    huggingface_hub raises GatedRepoError for a gated repo without access and RepositoryNotFoundError for a 401
    (gated or private without a token, or missing), both HfHubHTTPError subclasses; a 403 without an error code is a
    plain HfHubHTTPError (huggingface_hub 2.4 utils/_http.py:888-966, errors.py:313-343). transformers wraps them in
    an OSError ``from`` the original (transformers 5.17 utils/hub.py:469-514), so the chain is walked.
    """
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if isinstance(exc, GatedRepoError) or (isinstance(exc, HfHubHTTPError) and status in (401, 403)):
            token = "HF_TOKEN is set, but its account has no access" if os.environ.get("HF_TOKEN") else "no HF_TOKEN"
            return (
                f"the hub refused {model} ({status or 'gated'}; {token}): this model is gated or private. "
                f"Accept its license at https://huggingface.co/{model} and set HF_TOKEN to a token of that account "
                "(docker run -e HF_TOKEN=...), or pick an ungated copy such as unsloth/Llama-3.2-3B-Instruct"
            )
        exc = exc.__cause__ or exc.__context__
    return None


def announce_download(model: str, log=None) -> bool:
    """Say, before it starts, that loading ``model`` downloads it (a hub id not in the local cache yet): a first run
    of a 3B model spends minutes fetching several GB, which must not look like a hang. Returns whether it will."""
    import logging

    if model.startswith(("builtin:", "/", ".", "~")) or os.path.isdir(model) or os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    try:
        from huggingface_hub import constants, try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
    except Exception:  # not a repo id the cache understands: the load itself will say what is wrong
        return False
    if isinstance(cached, str):
        return False
    (log or logging.getLogger(__name__).info)(
        f"downloading {model} from the Hugging Face Hub: the first use of it here (several GB for a model of billions "
        f"of parameters); it is kept in {constants.HF_HUB_CACHE} for later runs"
    )
    return True


@contextlib.contextmanager
def hub_access(model: str) -> Iterator[None]:
    """Turn the hub's 401/403 while loading ``model`` into a :class:`ModelAccessError` that says what to do; a model
    that is about to be downloaded is announced first (:func:`announce_download`)."""
    announce_download(model)
    try:
        yield
    except Exception as exc:
        message = hub_refusal(exc, model)
        if message is None:
            raise
        raise ModelAccessError(message) from exc
