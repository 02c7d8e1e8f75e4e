"""migrate-config never writes over a file that another program changed while it was being
rewritten: an editor's save, in place or by renaming, even one that keeps the size and mtime, or
a removal. The file is left as the other program left it, the run exits 1 and says to run it
again, and no temporary stays behind. Real files in tmp_path."""

from __future__ import annotations

import os
import stat

import pytest
from migrate_support import NEW, OLD, call, listing, read, write

from trainspec.cli import migrate_config

CHANGED = (
    "{path}: changed while migrate-config was rewriting it; nothing was written: run "
    "migrate-config again\n"
)


def _append(path):
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("# saved by an editor\n")


def _same_size_and_time(path):
    """A write the clock cannot see: same size, mtime put back; only the bytes tell."""
    before = path.stat()
    path.write_bytes(path.read_bytes().replace(b"gpus_per_node = 2", b"gpus_per_node = 4"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _replaced_by_rename(path):
    """An editor that saves by renaming: same bytes, another inode."""
    other = path.with_name("saved.tmp")
    other.write_bytes(path.read_bytes())
    os.replace(other, path)


def _removed(path):
    path.unlink()


CHANGES = {
    "appended": _append,
    "same size and mtime": _same_size_and_time,
    "replaced by rename": _replaced_by_rename,
    "removed": _removed,
}


# What the file holds after migrate-config gave up on it: the other program's version.
LEFT = {
    "appended": OLD + "# saved by an editor\n",
    "same size and mtime": OLD.replace("gpus_per_node = 2", "gpus_per_node = 4"),
    "replaced by rename": OLD,
    "removed": None,
}


def _after(path):
    return read(path) if path.exists() else None


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_file_changed_while_it_is_rewritten_is_left_as_the_other_writer_left_it(
    tmp_path, monkeypatch, change
):
    # The other program writes after migrate-config has read and rewritten the text.
    path = write(tmp_path, OLD)
    real = migrate_config.migrate_text

    def migrate_text_meanwhile(*args):
        result = real(*args)
        CHANGES[change](path)
        return result

    monkeypatch.setattr(migrate_config, "migrate_text", migrate_text_meanwhile)
    code, out, err = call(str(path))
    assert code == 1
    assert err == CHANGED.format(path=path)
    assert out == (
        "migrate-config: nothing renamed; 1 file changed meanwhile, left unchanged (run "
        "migrate-config again)\n"
    )
    assert _after(path) == LEFT[change]
    assert listing(tmp_path) == ([] if change == "removed" else ["run.toml"])


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_file_changed_just_before_the_rename_is_not_replaced(tmp_path, monkeypatch, change):
    # The other program writes while the new bytes are being synced: the last moment before
    # the rename, after the temporary is complete.
    path = write(tmp_path, OLD)
    real_fsync = os.fsync

    def fsync(fd):
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            CHANGES[change](path)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    code, _, err = call(str(path))
    assert (code, err) == (1, CHANGED.format(path=path))
    assert _after(path) == LEFT[change]
    assert listing(tmp_path) == ([] if change == "removed" else ["run.toml"])


def test_running_again_after_a_change_migrates_the_new_contents(tmp_path, monkeypatch):
    path = write(tmp_path, OLD)
    real = migrate_config.migrate_text

    def migrate_text_meanwhile(*args):
        result = real(*args)
        _append(path)
        return result

    monkeypatch.setattr(migrate_config, "migrate_text", migrate_text_meanwhile)
    assert call(str(path))[0] == 1
    monkeypatch.setattr(migrate_config, "migrate_text", real)
    assert call(str(path))[0] == 0
    assert read(path) == NEW + "# saved by an editor\n"


def test_a_changed_file_does_not_stop_the_others(tmp_path, monkeypatch):
    changing, steady = write(tmp_path, OLD, "changing.toml"), write(tmp_path, OLD, "steady.toml")
    real = migrate_config.migrate_text

    def migrate_text_meanwhile(text, *args):
        result = real(text, *args)
        if read(changing) == text:
            _append(changing)
        return result

    monkeypatch.setattr(migrate_config, "migrate_text", migrate_text_meanwhile)
    code, out, _ = call(str(changing), str(steady))
    assert code == 1 and read(steady) == NEW
    assert out.splitlines()[-1] == (
        "migrate-config: renamed 1 key in 1 of 2 files; 1 file changed meanwhile, left unchanged "
        "(run migrate-config again)"
    )
