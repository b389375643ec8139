"""Worked examples in a prompt (RunConfig.few_shot_examples): their text format, read once here for the config's
rules (trainer.config.rules) and the prompt builder (trainer.loading.data.make_prompt).

The format is plain text, so that a form's text box, a YAML block and an API string hold it alike: a line starting
``Q:`` opens a question, a line starting ``A:`` its answer; each runs to the next such line, so an answer in the
reference recipe's XML format spans its lines as written.
"""

from __future__ import annotations


def parse_examples(text: str) -> list[tuple[str, str]]:
    """The (question, answer) pairs of a ``few_shot_examples`` text (see the module docstring). Raises ValueError
    saying what is wrong for text that is not such pairs."""
    pairs: list[tuple[str, str]] = []
    role, lines, question = None, [], None

    def close() -> None:
        nonlocal question
        body = "\n".join(lines).strip("\n")
        if role is not None and not body.strip():
            kind = "question" if role == "Q" else "answer"
            raise ValueError(f"few_shot_examples: an empty {kind} ({role}: with no text after it)")
        if role == "Q":
            if question is not None:
                raise ValueError(f"few_shot_examples: the question {question[:40]!r} has no answer (a line A: ...)")
            question = body
        elif role == "A":
            if question is None:
                raise ValueError("few_shot_examples: an answer (A:) comes before any question (Q:)")
            pairs.append((question, body))
            question = None

    for line in text.splitlines():
        if line.startswith(("Q:", "A:")):
            close()
            role, lines = line[0], [line[2:].removeprefix(" ")]
        elif role is None:
            if line.strip():
                raise ValueError("few_shot_examples: expected a line starting Q: (the question), then one starting A:")
        else:
            lines.append(line)
    close()
    if question is not None:
        raise ValueError(f"few_shot_examples: the question {question[:40]!r} has no answer (a line A: ...)")
    return pairs
