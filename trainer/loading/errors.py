"""The loaders' one error: this machine cannot run the config as asked (a module of its own, so that the backend and
the vLLM-on-a-CPU preparation it imports both raise it without importing each other)."""


class BackendError(RuntimeError):
    """This machine cannot run the config as asked; the message says what to change."""
