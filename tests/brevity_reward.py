"""A reward the built-in model learns within a few steps (for the learning test): shorter completions score higher."""


def brevity(prompts, completions, **kwargs):
    """-0.02 per character: a 20-character answer scores -0.4, an empty one 0.0."""
    texts = [c if isinstance(c, str) else "".join(m["content"] for m in c) for c in completions]
    return [-len(t) / 50 for t in texts]
