"""Every problem the product can report about a config comes from trainer/config/ (issue 39): "why was my config
refused?" has one answer, trainer.review.check, and each rule sits in the module of the concept it checks: in
trainer/config/ (the config's ground) or in trainer/review/ beside it (the rules that look at a model, data or
rewards). These tests fail when a rule is added anywhere else."""

from __future__ import annotations

import ast
import re

import pytest

from tests.conftest import ROOT
from tests.helpers import tiny_config
from trainer import review
from trainer.config.access import Access

CONFIG = ROOT / "trainer" / "config"
REVIEW = ROOT / "trainer" / "review"
# A function named like a rule: it checks something and says what is wrong ("check_dataset", "cluster_problems",
# "heldout_warnings", "code_tests_refusal", "file_split_problem").
RULE_NAME = re.compile(r"^(check_\w+|\w*_problems?|\w*_warnings|\w*_refusal)$")
# Functions outside trainer/config/ and trainer/review/ named like a rule that are no rule of a config, and why. A new
# rule of a config goes into one of those two (the module of its concept), not onto this list.
NOT_CONFIG_RULES = {
    # what vLLM's CPU engine runs: the model's files (its head width) and the engine's kernels, checked by the worker
    # too (trainer.loading.backend.select_backend), as gguf_problem is for a GGUF file
    "cpu_vllm_problem": "the CPU engine's reach, from the model's files",
    "head_width_problem": "the CPU engine's reach: the sentence for a model's head width, read once it is on disk",
    # rows of a data set: its Problem records (question and answer), not problems with a setting
    "arithmetic_problems": "the built-in task's rows",
    "load_problems": "a data set's rows",
    "_file_problems": "a data file's rows",
    "warm_up_problems": "the built-in model's warm-up rows",
    "arithmetic3_problems": "builtin:arithmetic3's rows (the calculator demo's task)",
    "heldout_problems": "the held-out rows an evaluation scores",
    # what a text is, shared by everything that stores or prints one (what a name names is trainer.config.names's)
    "text_problem": "control characters in any text grpo-studio stores or prints, a run's name among them",
    # a data file's contents as its reader meets them (trainer.review.data.check_dataset reports them for a config)
    "check_value": "one value of a data file's row, checked as the loader reads every row",
    "_json_problem": "a data file's JSON syntax",
    # the machine and the files a run leaves, met at run time, not a config's settings
    "isolation_problem": "whether this machine can isolate code_tests (trainer.review.rewards asks it)",
    "code_tests_refusal": "the sandbox's answer to that, which trainer.review.rewards reports as a problem",
    "unsloth_refusal": "a model Unsloth refuses while loading it (the run then takes the TRL path)",
    "hub_refusal": "the hub refusing a download (a gated model, no token) while loading",
    "hub_problem": "whether this machine reaches the hub or has its files now (the worker and launch ask it)",
    "fetch_problem": "the same for a run's model and data set, asked when a worker starts here",
    "gguf_problem": "a .gguf file on disk: its header's architecture and tensor types (review.model reports it)",
    "file_problem": "a checkpoint's file on disk",
    "_safetensors_problem": "a checkpoint's weights file",
    "checkpoint_problem": "a saved checkpoint, before a resume or a fork copies it",
    "shared_dir_problem": "a Slurm job's data dir, checked on the compute node when the job starts",
    "_missing_database_problem": "the database file",
    "port_problem": "the dashboard server's port",
    "liveness_problem": "a running worker that stopped answering",
    "check_report": "the New-run page's validation panel, which shows what actions.validate (review.check) found",
}


def _modules_outside_config():
    for package in ("app", "trainer", "storage"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if not path.is_relative_to(CONFIG) and not path.is_relative_to(REVIEW):
                yield path, ast.parse(path.read_text(encoding="utf-8"))


def test_no_rule_of_a_config_is_written_outside_trainer_config():
    """Outside trainer/config/ and trainer/review/, no function is named like a rule unless it is listed above as no
    rule of a config."""
    found = sorted(
        f"{path.relative_to(ROOT)}: {node.name}"
        for path, tree in _modules_outside_config()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and RULE_NAME.match(node.name)
        and node.name not in NOT_CONFIG_RULES
    )
    home = "trainer/config/ or trainer/review/"
    assert found == [], f"a rule of a config belongs in {home} (the module of its concept): {found}"


def test_a_config_error_is_raised_only_from_trainer_config():
    """ConfigError, the refusal of a config, is built only in trainer/config/ (and by the presets, which refuse a
    shipped file naming a setting RunConfig lacks: a bug in the package, not a user's config)."""
    found = sorted(
        str(path.relative_to(ROOT))
        for path, tree in _modules_outside_config()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "ConfigError"
    )
    assert found == ["trainer/presets/__init__.py"]


def test_the_review_composes_only_rules_of_trainer_config():
    """trainer.review takes its rules from its own modules and trainer/config/'s (the config's ground); beside
    them it reads only a data set's rows (for the warnings about a reward mix) and the text guard that keeps a control
    character off the disk."""
    tree = ast.parse((REVIEW / "__init__.py").read_text(encoding="utf-8"))
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(("trainer", "app", "storage"))
    }
    assert {m for m in imported if not m.startswith(("trainer.config.", "trainer.review."))} == {
        "trainer.loading.data",
        "trainer.safe_text",
    }


def _written_in(fragment: str) -> list[str]:
    """The modules of app/, trainer/ and storage/ whose source holds ``fragment``."""
    return sorted(
        str(path.relative_to(ROOT))
        for package in ("app", "trainer", "storage")
        for path in (ROOT / package).rglob("*.py")
        if fragment in path.read_text(encoding="utf-8")
    )


DASHBOARD = Access()  # the dashboard's default: no custom reward code, local paths under the data dir only

# (concept, the settings changed from a valid config, the access, a fragment of the problem, the source text that
# writes it where the fragment alone is also an example in a docstring, and the module under trainer/ it is in)
BAD_CONFIGS = [
    (
        "field",
        {"beta": -1.0},
        None,
        "beta -1: expected a value from 0 to 10",
        "a value from {_number(lo)}",
        "config/rules.py",
    ),
    (
        "settings together",
        {"per_device_train_batch_size": 3},
        None,
        "is not divisible by the group size",
        None,
        "config/rules.py",
    ),
    (
        "a value's type",
        {"max_steps": "many"},
        None,
        "max_steps: expected a whole number",
        "expected {type_name(",
        "config/values.py",
    ),
    ("a key", {"learning_rte": 0.1}, None, "is not a setting: did you mean", None, "config/keys.py"),
    ("model", {"model_name_or_path": "builtin:huge"}, None, "the built-in models are", None, "review/model.py"),
    ("GPU path", {"deepspeed_stage": 2}, None, "needs num_processes of 2 or more", None, "review/model.py"),
    ("data", {"dataset_name": "builtin:nothing"}, None, "built-in data sets are", None, "review/data.py"),
    (
        "held-out",
        {"dataset_name": "builtin:code", "eval_steps": 5},
        None,
        "no held-out problems to evaluate",
        None,
        "review/heldout.py",
    ),
    ("rewards", {"reward_funcs": ["no_such_reward"]}, None, "unknown reward function", None, "review/rewards.py"),
    ("tools", {"tools": ["builtin:calculater"]}, None, "the built-in ones are", None, "review/tools.py"),
    (
        "a model for tools",
        {"environment": "builtin:calculator"},
        None,
        "chat template does not render a tool call",
        None,
        "review/tools.py",
    ),
    ("cluster", {"slurm_nodes": 2}, None, "more nodes need executor slurm", None, "config/cluster.py"),
    (
        "access",
        {"dataset_name": "data/rows.jsonl"},
        DASHBOARD,
        "reads local files only by their full path",
        None,
        "config/access.py",
    ),
    (
        "custom rewards",
        {"reward_funcs": ["mine.py:score"]},
        DASHBOARD,
        "custom reward code runs arbitrary",
        None,
        "config/access.py",
    ),
    (
        "custom tools",
        {"tools": ["mine.py:add"]},
        DASHBOARD,
        "custom tool code runs arbitrary",
        None,
        "config/access.py",
    ),
]


@pytest.mark.parametrize(
    ("concept", "changes", "access", "fragment", "source", "module"), BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS]
)
def test_the_one_entry_reports_each_concepts_problem_from_its_module(
    concept, changes, access, fragment, source, module
):
    """review.check, which every entry calls, reports a bad config of each concept, and the sentence it reports is
    written in that concept's module of trainer/config/ or trainer/review/ and nowhere else."""
    valid = tiny_config().to_dict()
    assert review.check(valid, access or Access(any_path=True)).problems == []
    found = review.check({**valid, **changes}, *([access] if access else [])).problems
    assert [p for p in found if fragment in p], found
    assert _written_in(source or fragment) == [f"trainer/{module}"]


def test_a_config_files_and_a_forks_problems_come_from_trainer_config(tmp_path):
    """The two entries that hold no mapping yet: a config file that is no mapping (the file reader) and a fork that
    changes what its checkpoint's adapter is (trainer.config.fork)."""
    from trainer.config import ConfigError, RunConfig
    from trainer.supervise.fork import ForkError, forked_config

    path = tmp_path / "list.yaml"
    path.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="expected a mapping of setting names to values"):
        RunConfig.load(path)
    assert _written_in("expected a mapping of setting names to values") == ["trainer/config/file.py"]
    with pytest.raises(ForkError, match="lora_r can't change in a fork"):
        forked_config(tiny_config().to_dict(), {"lora_r": 8}, step=2)
    with pytest.raises(ForkError, match="is not past the fork's step"):
        forked_config(tiny_config().to_dict(), {"max_steps": 2}, step=2)
    assert _written_in("can't change in a fork") == ["trainer/config/fork.py"]
    assert _written_in("is not past the fork's step") == ["trainer/config/fork.py"]
