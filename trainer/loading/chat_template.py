"""Rendering a model's chat template for the dashboard's preview, safely.

A chat template is code from whoever published the model (or uploaded its files): Jinja can reach Python objects,
so a plain ``jinja2.Environment`` lets a template such as ``{{ lipsum.__globals__['os'].popen('id').read() }}``
run commands in the dashboard. We render the way transformers does (``_compile_jinja_template`` in
transformers/utils/chat_template_utils.py): an ``ImmutableSandboxedEnvironment`` with ``trim_blocks`` and
``lstrip_blocks``, ``loopcontrols``, a ``tojson`` filter that doesn't escape HTML, and the globals
``raise_exception`` and ``strftime_now`` beside Jinja's ``range``, ``dict`` and ``namespace`` — nothing else.

The sandbox stops attribute escapes but not a template that loops for hours or builds a huge string, so rendering
also happens in a short-lived child process with CPU, memory and wall-clock limits: a hostile template costs a
few seconds of one process, never the dashboard. This file runs as that child (``python -I chat_template.py``)
and imports only the standard library and jinja2.
"""

from __future__ import annotations

import json
import subprocess
import sys

# A template that loops is stopped by its CPU time (RENDER_SECONDS); the wall clock is the bound for one that waits
# on nothing yet gets no CPU, as on a machine busy training: there, a child that imports jinja2 can need several
# seconds before it renders anything, which is no reason to call the template slow.
RENDER_SECONDS = 5.0
RENDER_WALL_SECONDS = 30.0
RENDER_MEMORY_MB = 512
MAX_TEMPLATE_CHARS = 200_000
MAX_OUTPUT_CHARS = 100_000


class TemplateRenderError(ValueError):
    """A chat template that could not be rendered, in one sentence."""


def render_chat_template(source: str, messages: list[dict], add_generation_prompt: bool = True) -> str:
    """Render ``source`` with ``messages`` in a sandboxed, resource-limited child process; raises
    :class:`TemplateRenderError` with the reason when the template fails, escapes, or runs too long."""
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateRenderError(f"the chat template is {len(source):,} characters; at most {MAX_TEMPLATE_CHARS:,}")
    job = json.dumps({"source": source, "messages": messages, "add_generation_prompt": add_generation_prompt})
    try:
        done = subprocess.run(
            [sys.executable, "-I", __file__],
            input=job.encode(),
            capture_output=True,
            timeout=RENDER_WALL_SECONDS,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            preexec_fn=_limits,
        )
    except subprocess.TimeoutExpired as exc:
        raise TemplateRenderError(f"the chat template took over {RENDER_WALL_SECONDS:g} s to render; stopped") from exc
    reply = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0 or not reply.startswith(("ok:", "error:")):
        raise TemplateRenderError(
            f"the chat template could not be rendered (it ran out of memory, {RENDER_MEMORY_MB} MB, or CPU time, "
            f"{RENDER_SECONDS:g} s)"
        )
    kind, _, text = reply.partition(":")
    if kind == "error":
        raise TemplateRenderError(f"the chat template failed: {text[:300]}")
    return text


def _limits() -> None:
    import resource

    memory = RENDER_MEMORY_MB * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    seconds = int(RENDER_SECONDS)
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _environment():
    """The environment transformers renders chat templates in (see the module docstring)."""
    from datetime import datetime

    import jinja2
    import jinja2.ext
    import jinja2.utils
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    class TemplateNamespace(jinja2.utils.Namespace):
        """``namespace()`` without underscore attributes (transformers' guard against reaching CPython internals)."""

        def __setitem__(self, name, value):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(f"a namespace attribute can't start with '_': {name!r}")
            jinja2.utils.Namespace.__setitem__(self, name, value)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    # Jinja's defaults that chat templates use (range, dict, namespace), transformers' two helpers, and nothing else:
    # lipsum, cycler and joiner are dropped (lipsum is the usual first step of template escapes).
    env.globals = {
        "range": env.globals["range"],
        "dict": lambda *args, **kwargs: dict(*args, **kwargs),
        "namespace": TemplateNamespace,
        "raise_exception": raise_exception,
        "strftime_now": strftime_now,
    }
    return env


def _child() -> None:
    job = json.loads(sys.stdin.read())
    try:
        template = _environment().from_string(job["source"])
        text = template.render(messages=job["messages"], add_generation_prompt=job["add_generation_prompt"])
    except Exception as exc:  # any template error, including the sandbox's SecurityError
        sys.stdout.write(f"error:{type(exc).__name__}: {exc}")
        return
    sys.stdout.write("ok:" + text[:MAX_OUTPUT_CHARS])


if __name__ == "__main__":
    _child()
