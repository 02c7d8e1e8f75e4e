"""migrate-config rewrites a file as a careful editor saves it: mode, owner and group kept, the
bytes synced before the rename and the directory after, and no temporary left behind, even by a
run killed with SIGKILL (the next run removes it). Real files in tmp_path; real processes where
the behaviour is a process's. A file that changes meanwhile: test_migrate_config_changed.py."""

from __future__ import annotations

import dataclasses
import errno
import os
import select
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from migrate_support import NEW, OLD, call, listing, read, write

from trainspec.cli import safe_write

BOM = "\ufeff"


def temporary(path, pid: int) -> str:
    return f".{path.name}.migrate-{pid}.tmp"


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=120)
    return child.pid


# --- mode, owner and group ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o640, 0o600, 0o644, 0o755, 0o444], ids=oct)
def test_mode_owner_and_group_are_kept(tmp_path, mode):
    path = write(tmp_path, OLD)
    path.chmod(mode)
    before = path.stat()
    assert call(str(path))[0] == 0
    after = path.stat()
    assert read(path) == NEW
    assert after.st_ino != before.st_ino  # replaced by a rename, not written over
    assert stat.S_IMODE(after.st_mode) == mode
    assert (
        (after.st_uid, after.st_gid)
        == (before.st_uid, before.st_gid)
        == (
            os.getuid(),
            os.getgid(),
        )
    )
    assert listing(tmp_path) == ["run.toml"]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_another_users_file_keeps_its_owner_group_and_set_id_bits(tmp_path):
    path = write(tmp_path, OLD)
    os.chown(path, 12345, 23456)
    path.chmod(0o6755)  # set after chown, which clears the set-id bits
    assert call(str(path))[0] == 0
    after = path.stat()
    assert read(path) == NEW
    assert (after.st_uid, after.st_gid) == (12345, 23456)
    assert stat.S_IMODE(after.st_mode) == 0o6755


def test_a_file_whose_owner_cannot_be_kept_is_left_alone(tmp_path, monkeypatch):
    # As a user who may not give files away: the file belongs to someone else, and fchown
    # refuses. Renaming our temporary over it would make the file ours; refuse instead.
    path = write(tmp_path, OLD)
    real = safe_write.snapshot

    def owned_by_another(target):
        return dataclasses.replace(real(target), uid=4242, gid=4343)

    def refuse(fd, uid, gid):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(safe_write, "snapshot", owned_by_another)
    monkeypatch.setattr(os, "fchown", refuse)
    code, out, err = call(str(path))
    assert code == 2 and read(path) == OLD
    assert err == (
        f"{path}: cannot keep its owner and group (uid 4242, gid 4343): operation not "
        "permitted; nothing was written: run migrate-config as that user or as root\n"
    )
    assert out == "migrate-config: nothing renamed; 1 file not migrated (see the errors above)\n"
    assert listing(tmp_path) == ["run.toml"]


def test_symlinks_are_followed(tmp_path):
    (tmp_path / "real").mkdir()
    real = write(tmp_path / "real", OLD, "real.toml")
    link = tmp_path / "link.toml"
    os.symlink(real, link)
    assert call(str(link))[0] == 0
    assert link.is_symlink() and read(real) == NEW
    assert listing(tmp_path / "real") == ["real.toml"]


def test_a_byte_order_mark_is_kept(tmp_path):
    path = write(tmp_path, BOM + OLD)
    code, _, err = call(str(path))
    assert (code, err) == (0, "")
    assert read(path) == BOM + NEW


# --- durable: synced before the rename, the directory after --------------------------------------


def test_the_new_bytes_are_synced_before_the_rename_and_the_directory_after(tmp_path, monkeypatch):
    path = write(tmp_path, OLD)
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            events.append(("fsync directory", os.readlink(f"/proc/self/fd/{fd}")))
        else:
            synced = os.readlink(f"/proc/self/fd/{fd}")
            events.append(("fsync file", synced))
            assert Path(synced).read_text(encoding="utf-8") == NEW  # all of it, before the sync
        real_fsync(fd)

    def replace(source, target):
        events.append(("replace", os.fspath(source)))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    assert call(str(path))[0] == 0
    temp = str(tmp_path / temporary(path, os.getpid()))
    assert events == [
        ("fsync file", temp),
        ("replace", temp),
        ("fsync directory", str(tmp_path)),
    ]
    assert read(path) == NEW


def test_a_directory_that_cannot_be_synced_is_reported(tmp_path, monkeypatch):
    path = write(tmp_path, OLD)
    real_fsync = os.fsync

    def fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    code, out, err = call(str(path))
    assert code == 2 and read(path) == NEW  # the rename is done; it may not be durable
    assert err == (
        f"{path}: renamed its keys, but could not sync its directory to disk (input/output "
        "error): the change may be lost if the machine crashes now\n"
    )
    assert "deployment.num_eval_gpus -> deployment.num_infer_gpus" in out


def test_a_file_system_that_cannot_sync_directories_is_not_an_error(tmp_path, monkeypatch):
    path = write(tmp_path, OLD)
    real_fsync = os.fsync

    def fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "Invalid argument")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    assert call(str(path)) == (
        0,
        f"{path}:{OLD.splitlines().index('num_eval_gpus = 1') + 1}: "
        "deployment.num_eval_gpus -> deployment.num_infer_gpus\n"
        "migrate-config: renamed 1 key in 1 of 1 file\n",
        "",
    )
    assert read(path) == NEW


# --- temporaries: never left behind, and removed once their process is gone ----------------------


@pytest.mark.parametrize("failing", ["fsync", "replace", "fchmod"])
def test_a_failed_write_leaves_the_file_and_no_temporary(tmp_path, monkeypatch, failing):
    path = write(tmp_path, OLD)

    def fail(*args):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, failing, fail)
    code, _, err = call(str(path))
    assert code == 2 and read(path) == OLD
    assert err == f"{path}: cannot write it: input/output error\n"
    assert listing(tmp_path) == ["run.toml"]


def test_an_interrupt_leaves_the_file_and_no_temporary(tmp_path, monkeypatch):
    path = write(tmp_path, OLD)

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):  # run() lets Ctrl-C through; main() exits 130
        call(str(path))
    assert read(path) == OLD and listing(tmp_path) == ["run.toml"]


def test_stale_temporaries_of_gone_processes_are_removed_and_others_kept(tmp_path):
    path = write(tmp_path, OLD)
    gone, alive = dead_pid(), os.getppid()
    kept = [
        temporary(path, alive),  # a run still going: its temporary is not ours to remove
        f".other.toml.migrate-{gone}.tmp",  # another file's
        ".run.toml.migrate-abc.tmp",  # not a pid
        ".run.toml.migrate-12.tmp.bak",
    ]
    for name in [temporary(path, gone), *kept]:
        (tmp_path / name).write_text("partial")
    code, out, err = call(str(path))
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == (
        f"{path}: removed {temporary(path, gone)}, left by a migrate-config run that was killed"
    )
    assert read(path) == NEW
    assert listing(tmp_path) == sorted([*kept, "run.toml"])


@pytest.mark.parametrize("text", [NEW, OLD + "num_infer_gpus = 1\n"], ids=["migrated", "conflict"])
def test_stale_temporaries_are_removed_when_nothing_is_written(tmp_path, text):
    path = write(tmp_path, text)
    (tmp_path / temporary(path, dead_pid())).write_text("partial")
    call(str(path))
    assert listing(tmp_path) == ["run.toml"] and read(path) == text


def test_check_removes_nothing(tmp_path):
    path = write(tmp_path, OLD)
    stale = temporary(path, dead_pid())
    (tmp_path / stale).write_text("partial")
    assert call("--check", str(path))[0] == 1
    assert listing(tmp_path) == sorted([stale, "run.toml"])


def test_a_long_file_name_still_gets_a_temporary(tmp_path):
    name = "r" * 250 + ".toml"  # 255 bytes: the longest name most file systems allow
    path = write(tmp_path, OLD, name)
    code, _, err = call(str(path))
    assert (code, err) == (0, "")
    assert read(path) == NEW and listing(tmp_path) == [name]


# A migrate-config process that stops, announcing it, when it syncs its temporary: the point
# where the temporary is complete and the file not yet replaced. The stop is the test's own
# patch of os.fsync in the child; nothing in trainspec waits for tests.
STOP_AT_FSYNC = """
import os, sys, time

def stop(fd):
    print("syncing", flush=True)
    time.sleep(600)

os.fsync = stop
sys.argv = ["migrate-config", sys.argv[1]]
from trainspec.cli.migrate_config import main
main()
"""


def _stopped_at_fsync(path) -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, "-c", STOP_AT_FSYNC, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready, _, _ = select.select([child.stdout], [], [], 120)
    line = child.stdout.readline() if ready else ""
    if line != "syncing\n":
        child.kill()
        _, stderr = child.communicate(timeout=60)
        pytest.fail(f"the child never reached fsync: {line!r} {stderr}")
    return child


def test_a_run_killed_with_sigkill_leaves_a_temporary_that_the_next_run_removes(tmp_path):
    path = write(tmp_path, OLD)
    child = _stopped_at_fsync(path)
    left = temporary(path, child.pid)
    assert listing(tmp_path) == sorted([left, "run.toml"])
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert read(path) == OLD  # the kill came before the rename: the file is whole
    assert (tmp_path / left).read_text() == NEW  # and what it left is only the temporary
    code, out, _ = call(str(path))
    assert code == 0 and read(path) == NEW
    assert f"{path}: removed {left}, left by a migrate-config run that was killed" in out
    assert listing(tmp_path) == ["run.toml"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_run_stopped_by_sigterm_or_ctrl_c_removes_its_temporary(tmp_path, signum):
    path = write(tmp_path, OLD)
    child = _stopped_at_fsync(path)
    child.send_signal(signum)
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 128 + signum
    assert "Traceback" not in stderr, stderr
    assert read(path) == OLD and listing(tmp_path) == ["run.toml"]
