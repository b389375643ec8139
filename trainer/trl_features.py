"""Which of TRL's GRPO settings the installed TRL has, for RunConfig's choices and its refusals (issue 38, item 7).

grpo-studio runs on TRL 1.15 (the GPU path: unsloth 2026.10.9 requires ``trl<=1.15.0``) and on 1.16. Both have the
loss types ``cispo``, ``sapo``, ``luspo`` and ``vespo`` and the settings in :data:`KNOBS` (trl 1.15.0
trainer/grpo_config.py:796 loss_type, :700 epsilon_high, :831 mask_truncated_completions, :861 top_entropy_quantile,
:920-950 vllm_importance_sampling_correction/_mode/_clip_max; 1.16.0 :801, 705, 836, 866, 925-955), but a TRL
outside that range, or a future one, may not: what the form offers and what a config may ask for follow the installed
TRL, and a config asking for what it lacks is refused naming that TRL's version.

Read from the installed TRL's ``trainer/grpo_config.py`` as text (its field declarations and the loss names in its
help), not by importing trl: trainer.config is ground, imported by the UI process, which stays light.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

# every TRL grpo-studio supports has these (TRL's own loss types since 0.2x)
BASE_LOSS_TYPES = ("grpo", "dapo", "dr_grpo", "bnpo")
# and these where the installed TRL has them
NEW_LOSS_TYPES = ("cispo", "sapo", "luspo", "vespo")
# RunConfig's settings that are GRPOConfig fields only some TRLs have
KNOBS = (
    "epsilon_high",
    "mask_truncated_completions",
    "top_entropy_quantile",
    "vllm_importance_sampling_correction",
    "vllm_importance_sampling_mode",
    "vllm_importance_sampling_clip_max",
)
HAVE_THEM = "TRL 1.15 and 1.16 have it"


@dataclass(frozen=True)
class TrlFeatures:
    """What one TRL's GRPOConfig offers."""

    version: str
    loss_types: tuple[str, ...]
    fields: frozenset[str]

    def lacks(self, setting: str, value: object = None) -> str | None:
        """The refusal for ``setting`` (``loss_type`` with ``value``, or one of :data:`KNOBS`) this TRL lacks."""
        if setting == "loss_type":
            if value in NEW_LOSS_TYPES and value not in self.loss_types:
                return f"loss_type {value!r} needs a newer TRL: the installed TRL {self.version} lacks it ({HAVE_THEM})"
            return None
        if setting in KNOBS and setting not in self.fields:
            return f"{setting} needs a newer TRL: the installed TRL {self.version} lacks it ({HAVE_THEM})"
        return None


def read_features(source: str, version: str) -> TrlFeatures:
    """The features of a TRL whose ``grpo_config.py`` is ``source``."""
    fields = frozenset(re.findall(r"^    (\w+): [^=\n]+= field\(", source, flags=re.MULTILINE))
    losses = tuple(name for name in NEW_LOSS_TYPES if f"'{name}'" in source or f'"{name}"' in source)
    return TrlFeatures(version, BASE_LOSS_TYPES + losses, fields)


@functools.cache
def installed() -> TrlFeatures:
    """The installed TRL's features (none of the optional ones when TRL is not installed here)."""
    spec = importlib.util.find_spec("trl")  # finds the package without importing it
    locations = list(spec.submodule_search_locations or []) if spec else []
    source = Path(locations[0], "trainer", "grpo_config.py") if locations else None
    if source is None or not source.is_file():
        return TrlFeatures("(not installed)", BASE_LOSS_TYPES, frozenset())
    try:
        version = importlib.metadata.version("trl")
    except importlib.metadata.PackageNotFoundError:
        version = "(unknown version)"
    return read_features(source.read_text(), version)
