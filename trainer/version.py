"""grpo-studio's own version, for the CLI's ``--version``, the dashboard's banner and exported model cards."""

from __future__ import annotations


def version() -> str:
    """grpo-studio's version: the installed package's, or pyproject.toml's when run from a checkout."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("grpo-studio")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        with open(Path(__file__).resolve().parent.parent / "pyproject.toml", "rb") as f:
            return tomllib.load(f)["project"]["version"]
