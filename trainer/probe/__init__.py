"""The pre-launch probe: before any training, sample a few prompts × G completions from the base model with the
run's own generation settings, score them with the run's own rewards, and say whether the run can learn.

GRPO learns only from groups whose answers score differently (docs/grpo.md § GRPO in five quantities: a group with
reward std 0 teaches nothing), and the commonest wasted run is one where nearly every group scores alike from the
first step: the model never produces the answer format, or every answer is cut at the length limit. The probe
measures exactly that, in seconds on the tiny model and about a minute on a GPU, and states a verdict with a fix per
risk (trainer.probe.report).

- :mod:`trainer.probe.sampling`: the model work (imports torch; runs in the CLI or a child process);
- :mod:`trainer.probe.report`: the report, verdict and text (torch-free);
- :mod:`trainer.probe.job`: the probe as a child process, for the dashboard, which never imports torch itself;
- ``python -m trainer.probe CONFIG [CONFIG...] --json OUT``: that child process (a sweep's members in one).
"""
