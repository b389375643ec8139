"""Hub access: the Hugging Face Hub refusing a model (gated, private, a bad token), or out of reach (no network, or
HF_HUB_OFFLINE=1) for a model or data set that is not in the local cache, reported in one sentence that says what to
do, instead of a chain of HTTP errors after minutes of retries. Wrapped around the model and tokenizer loads of
training (trainer.loading.backend) and of the compare panel, and the data set loads (trainer.loading.data); the
command line asks :func:`fetch_problem` before it creates a run.

Why a look before the load: huggingface_hub retries a refused or timed-out connection 5 times with backoff (1, 2, 4,
8, 8 s, huggingface_hub 2.4 utils/_http.py:469-564) for every file a load asks for. Offline, a run of
Qwen/Qwen2.5-0.5B-Instruct failed after 58 s here (142 s in the issue's report) with a 12-frame traceback, and a
model already in the cache took 3 min 12 s to load; one request with a 3 s limit answers the same question.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from trainer.config.names import BUILTIN_DATASETS, GSM8K_NAMES, hub_id_problem, looks_like_path

log = logging.getLogger(__name__)

# How long the look at the hub waits for an answer (a refused connection or a name that doesn't resolve answers at
# once; a network that drops packets takes this long).
REACH_TIMEOUT_S = 3.0
# How long an answer is kept: a model load asks twice (the model, then its tokenizer), the command line's check and
# its data set once more; a network that comes back is seen on the next run.
REACH_KEPT_S = 30.0
_answers: dict[str, tuple[float, str | None]] = {}
# What the sentence says was tried when the cache is all there is to read.
OFFLINE = "HF_HUB_OFFLINE=1 is set"

Kind = Literal["model", "dataset"]


class ModelAccessError(OSError):
    """The hub refused the model (gated, private, or a bad token); the message says what to do."""


class HubUnreachable(OSError):
    """A model or data set must come from the hub, which is out of reach (or HF_HUB_OFFLINE=1), and it is not in the
    local cache; the message says what was tried and what to use instead."""


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
    """Turn the hub's 401/403 while loading ``model`` into a :class:`ModelAccessError` that says what to do, and a hub
    out of reach into a :class:`HubUnreachable` within seconds (:func:`hub_or_cache`); a model that is about to be
    downloaded is announced first (:func:`announce_download`)."""
    try:
        with hub_or_cache(model, "model"):
            announce_download(model)
            yield
    except Exception as exc:
        message = hub_refusal(exc, model)
        if message is None:
            raise
        raise ModelAccessError(message) from exc


# --- the hub out of reach -------------------------------------------------------------------------------------------
def hub_repo(name: str, kind: Kind) -> str | None:
    """The hub repository a model or data set setting is fetched from, or None when it names none: a built-in, a
    local folder or file (a .gguf too), or a name the config's rules refuse anyway (trainer.config.names)."""
    if name.startswith("builtin:") or name in BUILTIN_DATASETS or looks_like_path(name):
        return None
    if kind == "dataset" and name in GSM8K_NAMES:
        return "openai/gsm8k"  # what trainer.loading.data loads for either name
    if os.path.lexists(Path(name).expanduser()) or hub_id_problem(name, kind, owner_required=kind == "dataset"):
        return None
    return name


def is_cached(repo: str, kind: Kind) -> bool:
    """Whether ``repo`` has been fetched to this machine before: a model's config.json in the hub cache; a data set's
    folder in the hub cache or in datasets' own cache (``owner___name``, its last part snake-cased by datasets 5.2
    load.py:811-812, so compared without case and separators)."""
    from huggingface_hub import constants, try_to_load_from_cache

    if kind == "model":
        try:
            return isinstance(try_to_load_from_cache(repo, "config.json"), str)
        except Exception:  # noqa: BLE001 - a name the cache can't hold is not in it
            return False
    if (Path(constants.HF_HUB_CACHE) / f"datasets--{repo.replace('/', '--')}").is_dir():
        return True
    folder = Path(os.environ.get("HF_DATASETS_CACHE") or Path(constants.HF_HOME) / "datasets").expanduser()
    owner, name = repo.split("/", 1)

    def plain(text: str) -> str:
        return "".join(c for c in text.lower() if c.isalnum())

    try:
        return any(plain(p.name) == plain(owner + name) for p in folder.glob(f"{owner}___*") if p.is_dir())
    except OSError:
        return False


def unreachable_reason() -> str | None:
    """Why the hub's endpoint (huggingface_hub's ENDPOINT: HF_ENDPOINT, a mirror, through any proxy the environment
    names) gives no answer now, in a few words; None when it answered, whatever the answer (the load that follows
    reports a refusal its own way). One request, on huggingface_hub's own session, within :data:`REACH_TIMEOUT_S`:
    the request runs in a thread because resolving the host's name is not bound by the request's timeout."""
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    endpoint = constants.ENDPOINT
    kept = _answers.get(endpoint)
    if kept is not None and time.monotonic() - kept[0] < REACH_KEPT_S:
        return kept[1]
    answer: list[str | None] = []

    def ask() -> None:
        try:
            get_session().head(endpoint, timeout=REACH_TIMEOUT_S, follow_redirects=False)
            answer.append(None)
        except Exception as exc:  # noqa: BLE001 - any failure to get an answer is the reason
            answer.append(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)

    thread = threading.Thread(target=ask, name="hub-reach", daemon=True)
    thread.start()
    thread.join(REACH_TIMEOUT_S + 1)
    reason = answer[0] if answer else f"no answer in {REACH_TIMEOUT_S:g} s"
    _answers[endpoint] = (time.monotonic(), reason)
    return reason


def unreachable_message(repo: str, kind: Kind, why: str) -> str:
    """The one sentence: what was tried (``why``: the endpoint and its error, or HF_HUB_OFFLINE=1) and what to use."""
    if kind == "model":
        what, instead = repo, "a local model folder, a .gguf file, or a built-in model (builtin:tiny)"
    else:
        what, instead = (
            f"the data set {repo}",
            "a local .jsonl, .json, .csv or .parquet file, or builtin:word-problems (GSM8K's format, offline)",
        )
    return (
        f"can't reach the Hugging Face Hub ({why}) to download {what}, and it is not in the local cache: use {instead}"
    )


def fetch_problem(model: str, dataset: str) -> str | None:
    """The sentence of :func:`hub_problem` for the first of a run's model and data set that can't be had, or None."""
    from trainer.loading.gguf import offline_copy

    # a model with an installed GGUF copy trains from it when it is not cached (trainer.loading.backend.offline_source)
    model_problem = None if offline_copy(model) is not None else hub_problem(model, "model")
    return model_problem or hub_problem(dataset, "dataset")


def hub_problem(name: str, kind: Kind) -> str | None:
    """Why ``name`` can't be had here, in one sentence, or None: it is to come from the hub, is not in the local
    cache, and the hub is out of reach (or HF_HUB_OFFLINE=1 says use the cache only). Something in the cache is
    never refused: the load then reads the cache (:func:`hub_or_cache`)."""
    from huggingface_hub import constants

    repo = hub_repo(name, kind)
    if repo is None or is_cached(repo, kind):
        return None
    if constants.HF_HUB_OFFLINE:
        return unreachable_message(repo, kind, OFFLINE)
    reason = unreachable_reason()
    return None if reason is None else unreachable_message(repo, kind, f"{constants.ENDPOINT}: {reason}")


@contextlib.contextmanager
def hub_or_cache(name: str, kind: Kind) -> Iterator[None]:
    """Load ``name`` from the hub, or from the local cache when the hub is out of reach (huggingface_hub and datasets
    in offline mode for the load, which then asks nothing of the network), or raise :class:`HubUnreachable` at once
    when it is in neither. A load that finds no cache entry while offline (HF_HUB_OFFLINE=1, or a cache entry that
    was only partly there) raises the same sentence instead of the library's chain of errors."""
    from huggingface_hub import constants

    repo = hub_repo(name, kind)
    if repo is None:
        yield
        return
    why = OFFLINE if constants.HF_HUB_OFFLINE else None
    if why is None and (reason := unreachable_reason()) is not None:
        why = f"{constants.ENDPOINT}: {reason}"
        if not is_cached(repo, kind):
            raise HubUnreachable(unreachable_message(repo, kind, why))
        log.warning("the Hugging Face Hub is out of reach (%s): %s is read from the local cache", why, repo)
    try:
        with _offline() if why else contextlib.nullcontext():
            yield
    except Exception as exc:
        if why and _missed_the_cache(exc):
            raise HubUnreachable(unreachable_message(repo, kind, why)) from exc
        raise


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """huggingface_hub (which transformers asks: huggingface_hub 2.4 constants.py:197-214) and datasets (its own copy,
    datasets 5.2 config.py:216-217) in offline mode for a while. Process-wide: another thread's hub request in the
    meantime is answered from the cache too, which is all it could get from a hub out of reach."""
    from huggingface_hub import constants

    modules = [constants] + [m for m in (sys.modules.get("datasets.config"),) if m is not None]
    before = [m.HF_HUB_OFFLINE for m in modules]
    for module in modules:
        module.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        for module, value in zip(modules, before, strict=True):
            module.HF_HUB_OFFLINE = value


def _missed_the_cache(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) is an offline load not finding its files: huggingface_hub's
    LocalEntryNotFoundError or OfflineModeIsEnabled (transformers wraps them in an OSError), or datasets' ConnectionError
    ("Couldn't reach 'openai/gsm8k' on the Hub (OfflineModeIsEnabled)", datasets 5.2 load.py:1081-1125)."""
    from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (LocalEntryNotFoundError, OfflineModeIsEnabled, ConnectionError)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
