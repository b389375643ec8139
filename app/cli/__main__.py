"""``python -m app.cli``: the same command line as ``grpo-studio``."""

from app.cli.main import main

raise SystemExit(main())
