"""Hostile input from dashboard users and config files is refused in one clear sentence: nothing runs that the
operator did not choose, nothing outside the data dir is read or written, and no input costs more than seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.web.pages import new_run
from app.web.widgets.verdict import problem
from storage import queries
from storage.db import data_dir, get_sessionmaker, slug
from tests.helpers import tiny_config
from trainer import review
from trainer.config import ConfigError, RunConfig
from trainer.config.access import Access
from trainer.loading.chat_template import TemplateRenderError, render_chat_template

ROOT = Path(__file__).resolve().parents[2]
BILLION_LAUGHS = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")),
    ]
)


def _values(config: RunConfig) -> dict:
    return new_run.form_values(config)


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


# --- 1. chat templates run sandboxed --------------------------------------------------------------------------------
def test_preview_does_not_run_a_template_that_reaches_for_os(tmp_path):
    marker = tmp_path / "pwned"
    model = data_dir() / "uploads" / "evil-model"
    model.mkdir(parents=True, exist_ok=True)
    template = "{{ lipsum.__globals__['os'].popen('touch " + str(marker) + "').read() }}"
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    text = new_run.preview(Access(), _values(tiny_config(model_name_or_path=str(model))))
    assert text.startswith(problem("the chat template failed")) and ("SecurityError" in text or "undefined" in text)
    assert not marker.exists()


def test_template_globals_are_the_ones_transformers_provides():
    source = (
        "{{ raise_exception is defined }} {{ strftime_now('%Y') | length }} {{ lipsum is defined }} "
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}"
    )
    assert render_chat_template(source, [{"role": "user", "content": "hi"}]) == "True 4 False 1"
    with pytest.raises(TemplateRenderError, match="no system messages"):
        render_chat_template("{{ raise_exception('no system messages') }}", [])


@pytest.mark.timeout(300)  # a hang guard: the template is stopped at its own limit
def test_a_template_that_loops_forever_is_stopped():
    with pytest.raises(TemplateRenderError, match="took over|ran out of memory"):
        render_chat_template("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}", [])


# --- 2. exports never write outside the data dir --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["../../../../tmp/x", "/etc/cron.d/evil", "..", "a/../../b"])
def test_export_yaml_writes_a_slug_under_the_data_dir(name):
    path, _ = new_run.export_yaml(Access(), _values(tiny_config(name=name)))
    path = Path(path).resolve()
    assert path.is_relative_to(data_dir().resolve() / "exports")
    assert path.name == f"{slug(name)}.yaml" and "/" not in slug(name) and not slug(name).startswith(".")


# --- 3. the dashboard reads local paths only under the data dir and --allow-path ------------------------------------
def test_preview_and_validate_refuse_a_file_outside_the_allowed_dirs(tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("question,answer\nthe password is hunter2,1\n")
    values = _values(tiny_config(dataset_name=str(secret)))
    for text in (new_run.preview(Access(), values), new_run.check(Access(), values)):
        assert "hunter2" not in text and "local paths are limited to" in text and "--allow-path" in text
    missing = _values(tiny_config(dataset_name=str(tmp_path / "nothing.csv")))
    # the same refusal whether or not the file exists: the form is no oracle for the server's files
    assert "no such file" not in new_run.check(Access(), missing)
    assert "hunter2" in new_run.preview(Access(allowed_dirs=(str(tmp_path),)), values)


def test_symlinks_and_dotdot_out_of_the_data_dir_are_refused(tmp_path):
    outside = tmp_path / "outside.jsonl"
    outside.write_text(json.dumps({"question": "q", "answer": "1"}) + "\n")
    link = data_dir() / "uploads" / "link.jsonl"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(outside)
    dotdot = str(data_dir() / ".." / ".." / outside.relative_to("/"))
    for name in (str(link), dotdot):
        assert "local paths are limited to" in new_run.check(Access(), _values(tiny_config(dataset_name=name)))


def test_custom_reward_code_is_not_imported_without_the_operator_flag(tmp_path):
    marker = tmp_path / "imported"
    module = tmp_path / "evil.py"
    module.write_text(
        f"open({str(marker)!r}, 'w').close()\ndef f(completions, **kw):\n    return [0.0] * len(completions)\n"
    )
    text = new_run.check(Access(), _values(tiny_config(reward_funcs=[f"{module}:f"])))
    assert "--allow-custom-rewards" in text and not marker.exists()


# --- 4, 5. configs bounded in size and expansion, parsed off the dashboard's interpreter -----------------------------
def test_billion_laughs_is_refused_quickly_by_the_cli(tmp_path):
    config = tmp_path / "laughs.yaml"
    config.write_text(BILLION_LAUGHS)
    assert len(BILLION_LAUGHS) < 600
    done = _cli("run", str(config))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "expands to more than 100,000 values" in done.stderr


def test_billion_laughs_import_in_the_dashboard_is_refused(tmp_path):
    import gradio as gr

    config = tmp_path / "laughs.yaml"
    config.write_text(BILLION_LAUGHS)
    with pytest.raises(gr.Error, match="expands to more than"):
        new_run.import_yaml(str(config))


def test_an_oversized_config_is_refused_before_parsing(tmp_path):
    config = tmp_path / "big.yaml"
    config.write_text("system_prompt: " + "x" * 2_000_000)
    with pytest.raises(ConfigError, match="too large for a run config"):
        RunConfig.load(config)


def test_oversized_values_are_refused_and_never_echoed():
    config, _ = RunConfig.from_dict({"system_prompt": "y" * 50_000, "name": "n" * 5000})
    problems = review.problems(config, check_files=False)
    assert any("system_prompt is 50,000 characters long: at most 20,000" in p for p in problems)
    assert all(len(p) < 300 for p in problems)
    with pytest.raises(ConfigError) as err:
        RunConfig.from_dict({"seed": "z" * 10_000})
    assert len(str(err.value)) < 500


# --- 6. numbers: finite, in range, every problem at once ------------------------------------------------------------
def test_non_finite_and_huge_numbers_are_refused_all_at_once(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text(
        "reward_weights: [.nan, .inf, -.inf]\nseed: 1e20\nlogging_steps: 100000000000000000000000\n"
        "learning_rate: abc\nbeta: -0.5\nnum_generations: 1\n"
    )
    with pytest.raises(ConfigError) as err:
        RunConfig.load(config)
    text = "\n".join(err.value.problems)
    for expected in (
        "reward_weights[0] is NaN",
        "reward_weights[1] is inf: expected a finite number",
        "reward_weights[2] is -inf",
        "seed 1e+20: expected a value from 0 to 4,294,967,295",
        "logging_steps 1e+23: expected a value from 1 to 1,000,000",
        "learning_rate: expected a number, got 'abc'",  # the type error and the range errors together
        "beta -0.5: expected a value from 0 to 10",
        "group size 1",
    ):
        assert expected in text, expected


# --- 7. broken data files are named with what is wrong, before anything starts ---------------------------------------
@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("empty.jsonl", b"", "the file is empty"),
        ("header.csv", b"question,answer\n", "a header but no rows"),
        ("latin1.csv", "question,answer\ncafé,1\n".encode("latin-1"), "line 2 is not UTF-8 text"),
        ("utf16.csv", "question,answer\nq,1\n".encode("utf-16"), "UTF-16 text; save it as UTF-8"),
        ("fake.parquet", b"this is not parquet at all", "not a Parquet file"),
        ("bad.jsonl", b'{"question": "q", "answer": "1"}\n{broken\n', "line 2 is not valid JSON"),
        ("list.jsonl", b"[1, 2]\n[3]\n", "line 1 is a JSON list"),
        ("cols.jsonl", b'{"problem": "q", "solution": "1"}\n', "has no column 'question', 'answer'"),
        ("fields.csv", b"question,answer\nq,1\nq,2,3\n", "line 3 has 3 fields but the header has 2"),
        ("blank.csv", b"question,answer\n,1\n", "row 1 has an empty 'question'"),
    ],
)
def test_validate_names_what_is_wrong_with_a_data_file(name, content, expected):
    path = data_dir() / "uploads" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    with get_sessionmaker().begin() as s:
        before = len(queries.list_runs(s))
    values = _values(tiny_config(dataset_name=str(path)))
    assert expected in new_run.check(Access(), values)
    assert expected in new_run.launch(Access(), values)
    with get_sessionmaker().begin() as s:
        assert len(queries.list_runs(s)) == before  # nothing created


def test_validation_and_preview_read_only_the_head_of_a_large_file():
    from trainer.loading.datafiles import HEAD_ROWS, summarize

    path = data_dir() / "uploads" / "large.csv"
    with path.open("w") as f:
        f.write("question,answer\n")
        for i in range(200_000):
            f.write(f"What is {i} + 1?,{i + 1}\n")
        f.write("broken,row,with,too,many,fields\n")  # past the head: only the worker's full read meets it
    summary = summarize(path, "question", "answer")
    assert len(summary.head) == HEAD_ROWS and summary.rows == 200_001
    assert "What is 2 + 1?" in new_run.preview(Access(), _values(tiny_config(dataset_name=str(path))))


# --- 8. broken files and settings get one sentence, not a traceback -------------------------------------------------
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (bytes(range(256)) * 4, "holds binary data, not UTF-8 text"),
        ("name: x\n".encode("utf-16"), "holds UTF-16/32 text"),
        (("a: " + "[" * 5000 + "]" * 5000).encode(), "nested more than 20 levels deep"),
        (b"a: &a [*a]\n", "refers to itself"),
        (b"name: [unclosed\n", "not valid YAML"),
        (b"- just\n- a list\n", "expected a mapping of setting names to values, got a list"),
    ],
)
def test_cli_refuses_hostile_config_files_in_one_message(tmp_path, content, expected):
    config = tmp_path / "config.yaml"
    config.write_bytes(content)
    done = _cli("run", str(config))
    assert done.returncode == 2 and "Traceback" not in done.stderr and expected in done.stderr


def test_cli_reports_a_corrupt_database_in_one_sentence(tmp_path):
    database = tmp_path / "broken.db"
    database.write_bytes(b"this is not an SQLite database " * 100)
    done = _cli("runs", env={"DATABASE_URL": f"sqlite:///{database}"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"the database {database} is damaged" in done.stderr and "move the file aside" in done.stderr


def test_monitor_reports_a_damaged_database_without_sql():
    from sqlalchemy.exc import DatabaseError

    from app.web.pages import monitor

    def broken(*args, **kwargs):
        raise DatabaseError("SELECT * FROM runs", {}, Exception("database disk image is malformed"))

    original = monitor._refresh
    monitor._refresh = broken
    try:
        header = monitor.refresh(1, [], 0.0, "step", 0, {}).header
    finally:
        monitor._refresh = original
    assert "is damaged (database disk image is malformed)" in header and "SELECT" not in header


@pytest.mark.slow
def test_serve_refuses_a_malformed_auth_variable():
    done = _cli("serve", "--port", "1", env={"GRPO_STUDIO_AUTH": "no-colon-here"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "GRPO_STUDIO_AUTH: auth must look like user:password" in done.stderr
    assert "no-colon-here" not in done.stderr  # a secret is never echoed


@pytest.mark.slow
def test_serve_refuses_an_allow_path_that_does_not_exist(tmp_path):
    done = _cli("serve", "--allow-path", str(tmp_path / "missing"))
    assert done.returncode == 2 and "no such directory" in done.stderr
