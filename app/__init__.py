"""The grpo-studio dashboard and command line. Nothing here imports torch at import time."""
