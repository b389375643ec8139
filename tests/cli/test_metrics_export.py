"""Where ``grpo-studio export RUN --metrics FILE`` writes (issue 35 item 10): a directory, a file in place of a
folder, a link, a full disk and a path the file system refuses each get one sentence, and a failed write leaves the
file that was there, never half a table."""

from __future__ import annotations

import csv
import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from app.cli.main import main
from storage import queries
from storage.db import get_sessionmaker
from tests.conftest import ROOT
from tests.helpers import unshare_available

STEPS = 50


@pytest.fixture
def run_id(database):
    with get_sessionmaker().begin() as s:
        run = queries.create_run(s, "exported", {}, STEPS)
        for step in range(1, STEPS + 1):
            queries.add_metric_rows(s, queries.metric_rows(run.id, step, {"reward": step / 10, "kl": 0.01}, step))
        return run.id


@pytest.fixture
def out(tmp_path):
    """A folder of its own for the exports (the test's database lives in tmp_path)."""
    (tmp_path / "out").mkdir()
    return tmp_path / "out"


def _export(run_id, destination, capsys) -> tuple[int, str]:
    code = main(["export", str(run_id), "--metrics", str(destination)])
    captured = capsys.readouterr()
    return code, (captured.err or captured.out).strip()


def _steps(path) -> list[int]:
    with open(path) as handle:
        return [int(row["step"]) for row in csv.DictReader(handle)]


def test_a_directory_or_a_file_in_place_of_a_folder_is_refused_in_one_sentence(run_id, out, capsys):
    (out / "taken.csv").mkdir()
    code, said = _export(run_id, out / "taken.csv", capsys)
    assert code == 2 and "taken.csv is a directory: name a file in it, ending in .csv or .parquet" in said
    (out / "plain").write_text("a file, not a folder")
    code, said = _export(run_id, out / "plain" / "m.csv", capsys)
    assert code == 2 and "can't write a metrics file there" in said and "\n" not in said
    assert (out / "plain").read_text() == "a file, not a folder"
    code, said = _export(run_id, f"{out}/nul\x00.csv", capsys)
    assert code == 2 and "can't write a metrics file there (embedded null byte)" in said
    assert sorted(p.name for p in out.iterdir()) == ["plain", "taken.csv"]  # no partial file anywhere


def test_a_link_at_the_destination_is_replaced_not_written_through(run_id, out, capsys):
    """A link named like the export (to the database, say) must not have its target overwritten by a table."""
    target = out / "precious.db"
    target.write_bytes(b"SQLite format 3\x00 and what matters")
    (out / "m.csv").symlink_to(target)
    code, _ = _export(run_id, out / "m.csv", capsys)
    assert code == 0 and not (out / "m.csv").is_symlink()
    assert target.read_bytes() == b"SQLite format 3\x00 and what matters"
    assert _steps(out / "m.csv") == list(range(1, STEPS + 1))


def test_an_export_over_an_earlier_one_replaces_it_whole(run_id, out, capsys):
    destination = out / "m.parquet"
    destination.write_bytes(b"an older export")
    assert _export(run_id, destination, capsys)[0] == 0
    import pyarrow.parquet as pq

    assert pq.read_table(destination).column("step").to_pylist() == list(range(1, STEPS + 1))
    assert [p.name for p in out.iterdir()] == ["m.parquet"]


# Exports the run to a small tmpfs (a private mount namespace, no root needed) that a ballast file has filled,
# over an earlier export of the same name; the database stays on the host's disk.
ON_A_FULL_DISK = textwrap.dedent(
    """
    import json, os, sys
    from app.cli.main import main
    run_id, disk = sys.argv[1], sys.argv[2]
    with open(os.path.join(disk, "m.csv"), "w") as handle:
        handle.write("step,wall_time,reward\\n1,1,0.5\\n")
    st = os.statvfs(disk)
    with open(os.path.join(disk, "ballast"), "wb") as handle:
        handle.write(bytes(st.f_bavail * st.f_frsize))
    code = main(["export", run_id, "--metrics", os.path.join(disk, "m.csv")])
    kept = open(os.path.join(disk, "m.csv")).read()
    print("RESULT" + json.dumps({"code": code, "kept": kept, "files": sorted(os.listdir(disk))}))
    """
)


def _in_a_mount_namespace(mount: str, driver: str, folder, *args) -> tuple[dict, str]:
    """Run ``driver`` (a Python text) with ``args`` after the shell command ``mount``, in a private user and mount
    namespace (no root needed, nothing mounted on the host); returns its RESULT line and its stderr."""
    script = folder / "driver.py"
    script.write_text(driver)
    command = f"{mount} && exec {sys.executable} {script} {' '.join(map(str, args))}"
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert "RESULT" in done.stdout, done.stderr[-3000:]
    return json.loads(done.stdout.rsplit("RESULT", 1)[1].splitlines()[0]), done.stderr


@pytest.mark.skipif(not unshare_available(), reason="needs user namespaces (unshare -Urm) for a private tmpfs")
def test_a_full_disk_says_so_and_keeps_the_earlier_export(run_id, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    result, stderr = _in_a_mount_namespace(
        f"mount -t tmpfs -o size=1m tmpfs {disk}", ON_A_FULL_DISK, tmp_path, run_id, disk
    )
    assert result["code"] == 2
    said = stderr.strip().splitlines()[-1]
    assert said.endswith(
        f"{disk}/m.csv: the metrics file could not be written (No space left on device); nothing was written there"
    ), said
    assert result["kept"] == "step,wall_time,reward\n1,1,0.5\n"  # the earlier export, whole
    assert result["files"] == ["ballast", "m.csv"]  # and no partial file beside it


def test_a_private_file_replaced_stays_private(run_id, out, capsys):
    destination = out / "m.csv"
    destination.write_text("an older export")
    destination.chmod(0o600)
    assert _export(run_id, destination, capsys)[0] == 0
    assert stat.S_IMODE(destination.stat().st_mode) == 0o600
    assert _steps(destination) == list(range(1, STEPS + 1))


def test_a_name_near_the_file_systems_limit_is_written(run_id, out, capsys):
    """The partial file beside it must fit the 255-byte limit of a name as well."""
    destination = out / ("a" * 250 + ".csv")
    assert _export(run_id, destination, capsys) == (0, f"metrics ({STEPS} steps) written to {destination}")
    assert [p.name for p in out.iterdir()] == [destination.name]


def test_the_partial_file_of_a_killed_export_is_removed_by_the_next(run_id, out, capsys):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = out / f".m.csv.{int(dead.stdout)}-0123abcd.partial"
    left.write_text("step,wall_time\n1,")
    someone_elses = out / ".other.csv.1-0123abcd.partial"  # pid 1 lives: an export under way elsewhere is kept
    someone_elses.write_text("")
    assert _export(run_id, out / "m.csv", capsys)[0] == 0
    assert sorted(p.name for p in out.iterdir()) == [".other.csv.1-0123abcd.partial", "m.csv"]


# A file bind-mounted at the destination (`docker run -v $PWD/m.csv:/out/m.csv`) can be written but not replaced.
INTO_A_MOUNTED_FILE = textwrap.dedent(
    """
    import json, sys
    from app.cli.main import main
    code = main(["export", sys.argv[1], "--metrics", sys.argv[2]])
    print("RESULT" + json.dumps({"code": code}))
    """
)


@pytest.mark.skipif(not unshare_available(), reason="needs user namespaces (unshare -Urm) for a bind mount")
def test_a_file_bind_mounted_at_the_destination_is_written_in_place(run_id, out):
    host, inside = out / "host.csv", out / "container"
    host.write_text("an older export")
    inside.mkdir()
    (inside / "m.csv").write_text("")
    mount = f"mount --bind {host} {inside / 'm.csv'}"
    result, stderr = _in_a_mount_namespace(mount, INTO_A_MOUNTED_FILE, out.parent, run_id, inside / "m.csv")
    assert result == {"code": 0}, stderr
    assert _steps(host) == list(range(1, STEPS + 1))  # through the mount, into the host's file
    assert sorted(p.name for p in inside.iterdir()) == ["m.csv"]
