"""Presets: ready-made run configs, one YAML file each in this directory.

They live inside the ``trainer`` package, as package data, so that an installed grpo-studio (a wheel, the Docker
image) has them; a repository's top-level folder does not travel with a wheel. ``examples/`` in the repository holds
symbolic links to these files, so ``grpo-studio run examples/tiny-offline.yaml`` and the dashboard's preset menu read
the same bytes and cannot drift apart (tests/test_dashboard_logic.py checks every link). Links rather than copies:
grpo-studio runs on POSIX systems only (``fcntl``, bubblewrap), where git checks links out as links.

The first line of a preset, ``# preset: <title>``, is its title in the dashboard's menu.
"""

from __future__ import annotations

from pathlib import Path

from trainer.config import ConfigError, RunConfig

PRESET_DIR = Path(__file__).resolve().parent
TINY_DEMO = PRESET_DIR / "tiny-offline.yaml"
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
