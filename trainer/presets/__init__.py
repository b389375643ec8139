"""Presets: ready-made run configs, one YAML file each in this directory.

They live inside the ``trainer`` package, as package data, so that an installed grpo-studio (a wheel, the Docker
image) has them; a repository's top-level folder does not travel with a wheel. A preset is named by its file's stem
anywhere (``grpo-studio run tiny-offline``, ``grpo-studio presets`` lists them). ``examples/`` in the repository holds
copies of these files to read and edit (copies, not links: links break in zip downloads and on Windows checkouts);
tests/web/test_dashboard_logic.py checks that they are the same bytes.

The first line of a preset, ``# preset: <title>``, is its title in the dashboard's menu.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from trainer.config import ConfigError, RunConfig

PRESET_DIR = Path(__file__).resolve().parent
TINY_DEMO = PRESET_DIR / "tiny-offline.yaml"
# Ready-made sweeps (a run config with a ``sweep:`` block, issue 41), named like presets by ``grpo-studio sweep``;
# a folder apart, since a run preset holds no sweep.
SWEEP_DIR = PRESET_DIR / "sweeps"
TITLE_PREFIX = "# preset:"


def preset_files() -> list[Path]:
    """Every preset file, in name order."""
    return sorted(PRESET_DIR.glob("*.yaml"))


def preset_title(path: Path) -> str:
    """The title on a preset's first line (``# preset: <title>``), or its file name without the suffix."""
    first = path.read_text(encoding="utf-8").partition("\n")[0]
    return first.removeprefix(TITLE_PREFIX).strip() if first.startswith(TITLE_PREFIX) else path.stem


def load_preset(path: Path) -> RunConfig:
    """The config in a preset file; a preset that names a setting RunConfig doesn't have is a bug, so it raises."""
    config, notes = RunConfig.load(path)
    if notes:
        raise ConfigError([f"{path.name}: {note}" for note in notes])
    return config


def presets() -> dict[str, RunConfig]:
    """Every preset by its title, for the dashboard's menu."""
    return {preset_title(path): load_preset(path) for path in preset_files()}


def tiny_demo() -> RunConfig:
    """The offline demo: builtin:tiny learns builtin:arithmetic on a CPU in about a minute. It departs from the
    reference recipe where a tiny model on a CPU needs it (see the comments in tiny-offline.yaml)."""
    return load_preset(TINY_DEMO)


class PresetNotFound(ValueError):
    """A name that is neither a file nor a preset; the message names the presets and the nearest one."""


def resolve_preset(name_or_path: str, sweeps: bool = False) -> Path:
    """A config file's path: ``name_or_path`` itself when it is a file or has a directory part, else the preset of
    that name (``tiny-offline``, with or without ``.yaml``); raises :class:`PresetNotFound` naming the presets (and
    the one it was probably meant to be: ``tiny-ofline`` is one letter from ``tiny-offline``) otherwise. With
    ``sweeps`` the ready-made sweeps (:data:`SWEEP_DIR`) are looked in first."""
    path = Path(name_or_path)
    if path.exists() or "/" in name_or_path:
        return path
    stem = name_or_path.removesuffix(".yaml")
    for folder in (SWEEP_DIR, PRESET_DIR) if sweeps else (PRESET_DIR,):
        if (folder / f"{stem}.yaml").is_file():
            return folder / f"{stem}.yaml"
    names = [p.stem for p in preset_files()] + ([p.stem for p in sorted(SWEEP_DIR.glob("*.yaml"))] if sweeps else [])
    near = difflib.get_close_matches(stem, names, n=1, cutoff=0.75)
    meant = f"did you mean {near[0]}? " if near else ""
    raise PresetNotFound(
        f"{name_or_path}: no such file or preset; {meant}the presets are {', '.join(names)} (grpo-studio presets)"
    )
