"""What read_file reads and what stage 0 refuses: non-regular files, stdin, the size cap, I/O
errors, absurd nesting, integers outside 64 bits, nan and dates; each a located error, never a
traceback, a hang or exhausted memory."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.support import ROOT

from trainspec.config import (
    ConfigError,
    ConfigFileError,
    limits,
    load,
    read_file,
    reading,
    validate,
)
from trainspec.config.limits import MAX_DEPTH
from trainspec.config.merge import deep_merge
from trainspec.config.sources import MAX_BYTES, schema_directive

RL = "#:schema ../schema/rl_trainer.json\n"
CUSTOM_LOSS = '[loss]\ntype = "custom"\nimport_path = "my.loss"\n'


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def config_module(*argv: str, **kwargs) -> subprocess.CompletedProcess[str]:
    """`python -m trainspec.config ...` as a real process (what pipes and FIFOs need)."""
    kwargs.setdefault("capture_output", True)
    result = subprocess.run(
        [sys.executable, "-m", "trainspec.config", *argv], text=True, timeout=120, **kwargs
    )
    assert "Traceback" not in (result.stdout or "") + (result.stderr or ""), result.stderr
    return result


def only_error(err: pytest.ExceptionInfo[ConfigError]):
    (issue,) = err.value.errors
    return issue


# ------------------------------------------------------------------ what is read


def test_a_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "run.toml"
    os.mkfifo(fifo)  # no writer: opening it for reading would wait forever
    result = config_module("rl", str(fifo))
    assert result.returncode == 2
    assert result.stderr == (
        f"{fifo}: is a FIFO, not a regular file; pipe it into stdin and pass - instead\n"
    )


def test_process_substitution_is_refused_with_the_fix(tmp_path: Path) -> None:
    config = write(tmp_path, "run.toml", RL + "max_steps = 5\n")
    command = f'"{sys.executable}" -m trainspec.config rl <(cat "{config}")'
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "is a FIFO, not a regular file; pipe it into stdin and pass - instead" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("/dev/zero", "is a character device, not a regular file"),
        ("/dev/null", "is a character device, not a regular file"),
    ],
)
def test_devices_are_refused_at_once(path: str, what: str) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigFileError) as err:
        read_file(path)
    assert time.monotonic() - started < 5
    assert str(err.value).startswith(f"{path}: {what}; ")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError) as err:
        load("rl", [tmp_path])
    assert str(err.value) == (
        f"{tmp_path}: is a directory, not a TOML file; pass the config file inside it"
    )


def test_a_socket_is_refused(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "s.toml"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(ConfigFileError, match="is a socket, not a regular file"):
            read_file(path)


def test_a_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError) as err:
        load("rl", [tmp_path / "nope.toml"])
    assert str(err.value) == f"{tmp_path / 'nope.toml'}: no such file or directory"


def test_a_path_through_a_file_is_not_a_directory(tmp_path: Path) -> None:
    config = write(tmp_path, "run.toml", RL)
    with pytest.raises(ConfigFileError, match="not a directory"):
        read_file(config / "inner.toml")


def test_a_nul_in_the_name_is_a_config_file_error() -> None:
    with pytest.raises(ConfigFileError, match="is not a valid file name"):
        read_file("run\0.toml")


# ------------------------------------------------------------------ permissions


@pytest.mark.parametrize(
    ("failing", "fix"),
    [
        ("stat", "a directory on its path cannot be searched"),  # an unreadable parent
        ("open", "make it readable"),  # a file without read permission
    ],
)
def test_permission_denied_is_a_config_file_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str, fix: str
) -> None:
    config = write(tmp_path, "run.toml", RL)

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(reading.os, failing, denied)
    with pytest.raises(ConfigFileError) as err:
        load("rl", [config])
    assert str(err.value).startswith(f"{config}: permission denied; {fix}")


def _unprivileged() -> list[str] | None:
    """A command prefix that drops root (root reads every file whatever its mode)."""
    if os.geteuid() != 0:
        return []
    setpriv = "/usr/bin/setpriv"
    if not os.path.exists(setpriv):
        return None
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def world_readable_dir():
    """A directory any user can reach (pytest's tmp_path is private to its owner)."""
    import shutil
    import tempfile

    where = Path(tempfile.mkdtemp(prefix="trainspec-perm-"))
    where.chmod(0o755)
    yield where
    for path in where.rglob("*"):
        path.chmod(0o700)
    shutil.rmtree(where)


@pytest.mark.parametrize("case", ["unreadable-file", "unreadable-parent"])
def test_permission_denied_for_real(world_readable_dir: Path, case: str) -> None:
    prefix = _unprivileged()
    if prefix is None:
        pytest.skip("running as root without setpriv to drop privileges")
    parent = world_readable_dir / "configs"
    parent.mkdir(mode=0o755)
    config = parent / "run.toml"
    config.write_text(RL + "max_steps = 5\n")
    if case == "unreadable-file":
        config.chmod(0o000)
        expected = f"{config}: permission denied; make it readable"
    else:
        parent.chmod(0o000)
        expected = f"{config}: permission denied; a directory on its path cannot be searched"
    result = subprocess.run(
        [*prefix, sys.executable, "-m", "trainspec.config", "rl", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=world_readable_dir,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(expected), result.stderr
    assert "Traceback" not in result.stderr


# ------------------------------------------------------------------ the size cap


def test_a_sparse_2gb_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    with big.open("wb") as handle:
        handle.truncate(2 * 2**30)  # sparse: no disk used, 2 GiB by stat
    started = time.monotonic()
    with pytest.raises(ConfigFileError) as err:
        read_file(big)
    assert time.monotonic() - started < 5
    assert str(err.value).startswith(
        f"{big}: is 2048.0 MiB; a config larger than 16 MiB is refused"
    )


def test_a_file_just_over_the_cap_is_refused_and_one_at_the_cap_is_read(tmp_path: Path) -> None:
    over = tmp_path / "over.toml"
    over.write_bytes(b"#" * (MAX_BYTES + 1))
    with pytest.raises(ConfigFileError, match="a config larger than 16 MiB is refused"):
        read_file(over)
    at = tmp_path / "at.toml"
    at.write_bytes(b"#" * (MAX_BYTES - 1) + b"\n")
    assert read_file(at).data == {}


def test_stdin_over_the_cap_is_refused() -> None:
    result = config_module("rl", "-", input="#" * (MAX_BYTES + 10))
    assert result.returncode == 2
    assert result.stderr.startswith("<stdin>: is more than 16 MiB; a config larger than 16 MiB")


# ------------------------------------------------------------------ stdin


LONG_HEADER = "".join(f"# comment line {n:04d} that pads the file past 4 KiB\n" for n in range(200))


@pytest.mark.parametrize("name", ["-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"])
def test_a_piped_config_is_read_whole(name: str) -> None:
    text = RL + LONG_HEADER + 'max_steps = "many"\n'  # the error sits past the first 8 KiB
    assert len(text.encode()) > 8192
    result = config_module("rl", name, input=text)
    assert result.returncode == 1, result.stderr
    line = text.count("\n")
    where = "<stdin>" if name == "-" else name
    assert result.stderr.startswith(f"{where}:{line}:13: error: max_steps ")


def test_a_small_piped_config_is_not_empty() -> None:
    result = config_module("rl", "-", input=RL + "max_steps = 7\n")
    assert result.returncode == 0, result.stderr
    assert '"max_steps": 7' in result.stdout


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes, tty: bool = False) -> None:
    stream = io.BytesIO(data)
    stream.isatty = lambda: tty  # type: ignore[method-assign]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stream))


def test_stdin_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, (RL + "max_steps = 3\n").encode())
    first, second = read_file("-"), read_file("/dev/stdin")
    assert first.data == second.data == {"max_steps": 3}
    assert first.path == "<stdin>" and second.path == "/dev/stdin"
    assert first.text == (RL + "max_steps = 3\n").encode()  # kept whole, for the kind sniffing


def test_a_terminal_on_stdin_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, b"", tty=True)
    with pytest.raises(ConfigFileError, match="is a terminal; pipe a config into it"):
        read_file("-")


def test_no_stdin_is_a_config_file_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(ConfigFileError, match="stdin is closed"):
        read_file("-")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"#:schema ../schema/rl_trainer.json\nx = 1\n", (1, "../schema/rl_trainer.json")),
        (b"\xef\xbb\xbf#:schema ../schema/sft_trainer.json\n", (1, "../schema/sft_trainer.json")),
        (b"# my run\n  #:schema a.json\n", (2, "a.json")),
        (b"\n\n#:schema a.json\r\n", (3, "a.json")),
        (b"max_steps = 1\n#:schema a.json\n", None),  # after the first key: not a directive
        (b"", None),
    ],
)
def test_schema_directive(text: bytes, expected) -> None:
    assert schema_directive(text) == expected


# ------------------------------------------------------------------ deep nesting


def test_two_files_a_thousand_tables_deep_are_located(tmp_path: Path) -> None:
    header = "[" + ".".join(["a"] * 1000) + "]\nx = 1\n"
    first = write(tmp_path, "a.toml", RL + header)
    second = write(tmp_path, "b.toml", RL + header)
    with pytest.raises(ConfigError) as err:
        load("rl", [first, second])
    issue = only_error(err)
    assert issue.path == ".".join(["a"] * MAX_DEPTH)
    assert issue.message == f"is nested more than {MAX_DEPTH} levels deep"
    assert (issue.file, issue.line, issue.column) == (str(second), 2, 2)
    assert "nested this deeply" in issue.fix


def test_a_3000_deep_override_is_refused_at_its_flag() -> None:
    deep: list = []
    for _ in range(3000):
        deep = [deep]
    with pytest.raises(ConfigError) as err:
        load(
            "rl",
            [],
            {"loss.type": "custom", "loss.import_path": "my.loss", "loss.kwargs": {"a": deep}},
        )
    issue = only_error(err)
    assert issue.flag == "--loss.kwargs"
    assert issue.path == "loss.kwargs.a." + ".".join(["0"] * (MAX_DEPTH - 3))


def test_300_deep_arrays_in_loss_kwargs_are_located(tmp_path: Path) -> None:
    config = write(
        tmp_path, "run.toml", RL + CUSTOM_LOSS + "kwargs = {x = " + "[" * 300 + "]" * 300 + "}\n"
    )
    with pytest.raises(ConfigError) as err:
        load("rl", [config])
    issue = only_error(err)
    assert issue.path.startswith("loss.kwargs.x.0.")
    column = len("kwargs = {x = ") + (MAX_DEPTH - 3) + 1  # the array at the 24th level
    assert (issue.file, issue.line, issue.column) == (str(config), 5, column)


@pytest.mark.parametrize("bracket", ["[", "{a = "])
def test_nesting_too_deep_to_parse_has_a_position(tmp_path: Path, bracket: str) -> None:
    closing = "]" if bracket == "[" else "}"
    value = bracket * 5000 + ("1" if bracket == "[" else "") + closing * 5000
    config = write(tmp_path, "run.toml", RL + '# a string: "[[[["\nx = ' + value + "\n")
    with pytest.raises(ConfigFileError) as err:
        read_file(config)
    assert "too deeply to parse" in err.value.message
    assert err.value.line == 3
    assert err.value.column == len("x = ") + len(bracket) * MAX_DEPTH + 1


def test_merging_never_recurses() -> None:
    deep_a: dict = {}
    deep_b: dict = {}
    a, b = deep_a, deep_b
    for _ in range(20000):
        a["k"], b["k"] = {}, {}
        a, b = a["k"], b["k"]
    a["x"], b["y"] = 1, 2
    merged = deep_merge(deep_a, deep_b)
    for _ in range(20000):
        merged = merged["k"]
    assert merged == {"x": 1, "y": 2}
    assert "y" not in a  # the inputs are left alone


def test_a_cyclic_document_is_refused() -> None:
    cycle: dict = {}
    cycle["a"] = cycle
    with pytest.raises(ConfigError) as err:
        validate("rl", {"loss": {"type": "custom", "import_path": "m.f", "kwargs": cycle}})
    assert "nested more than" in only_error(err).message


# ------------------------------------------------------------------ 64-bit integers


@pytest.mark.parametrize(
    "literal",
    [
        "0x8000000000000000",
        "0xFFFF_FFFF_FFFF_FFFF",
        "0o1000000000000000000000",
        "0b1" + "0" * 63,
        "9223372036854775808",
        "-9223372036854775809",
    ],
)
def test_integers_outside_64_bits_in_a_file(tmp_path: Path, literal: str) -> None:
    config = write(tmp_path, "run.toml", RL + f"max_steps = 1\ndist_timeout_seconds = {literal}\n")
    with pytest.raises(ConfigFileError) as err:
        read_file(config)
    assert "outside TOML's 64-bit range" in err.value.message
    assert (err.value.line, err.value.column) == (3, len("dist_timeout_seconds = ") + 1)


@pytest.mark.parametrize("literal", ["0x7FFFFFFFFFFFFFFF", "-9223372036854775808", "0o777"])
def test_integers_at_the_64_bit_bounds_are_read(tmp_path: Path, literal: str) -> None:
    config = write(tmp_path, "run.toml", RL + f"x = {literal}\n")
    assert read_file(config).data["x"] == int(literal, 0)


def test_an_integer_of_thousands_of_digits_in_a_file(tmp_path: Path) -> None:
    config = write(tmp_path, "run.toml", RL + "max_steps = " + "9" * 5000 + "\n")
    with pytest.raises(ConfigFileError) as err:
        read_file(config)
    assert (err.value.line, err.value.column) == (2, 13)
    assert "set_int_max_str_digits" not in err.value.message


@pytest.mark.parametrize(
    "value", [2**70, -(2**63) - 1, 10**5000], ids=["2**70", "min-1", "10**5000"]
)
def test_an_override_outside_64_bits_is_refused(value: int) -> None:
    with pytest.raises(ConfigError) as err:
        load("rl", [], {"max_steps": value})
    issue = only_error(err)
    assert (issue.path, issue.flag) == ("max_steps", "--max_steps")
    assert issue.message.startswith("is outside the 64-bit integer range")


def test_an_integer_outside_64_bits_in_a_free_table(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        validate("rl", {"loss": {"type": "custom", "import_path": "m.f", "kwargs": {"n": 2**64}}})
    assert only_error(err).path == "loss.kwargs.n"


def test_a_long_cli_flag_is_refused() -> None:
    import json

    from trainspec.cli.validate_config import run

    out, err = io.StringIO(), io.StringIO()
    argv = ["--kind", "rl", "--max-steps", "99999999999999999999999", "--format", "json"]
    assert run(argv, out, err) == 1, err.getvalue()
    (error,) = json.loads(out.getvalue())["errors"]
    assert (error["path"], error["flag"]) == ("max_steps", "--max-steps")
    assert "64-bit" in error["message"]


# ------------------------------------------------------------------ nan and dates


def test_nan_and_dates_in_loss_kwargs_are_located(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        "run.toml",
        RL + CUSTOM_LOSS + "[loss.kwargs]\nx = nan\nwhen = 1979-05-27\nt = 07:32:00\n",
    )
    with pytest.raises(ConfigError) as err:
        load("rl", [config])
    found = {(e.path, e.line, e.column) for e in err.value.errors}
    assert found == {("loss.kwargs.x", 6, 5), ("loss.kwargs.when", 7, 8), ("loss.kwargs.t", 8, 5)}
    fixes = {e.path: e.fix for e in err.value.errors}
    assert fixes["loss.kwargs.x"] == "use a number"
    assert fixes["loss.kwargs.when"] == "quote it if you meant a string"


def test_inf_from_the_python_api_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        load("rl", [], {"optim.lr": float("inf")})
    issue = only_error(err)
    assert (issue.path, issue.flag) == ("optim.lr", "--optim.lr")
    assert issue.message == "must be a finite number, got inf"


@pytest.mark.parametrize("path", sorted((ROOT / "configs").rglob("*.toml")), ids=str)
def test_the_example_configs_pass_stage_0(path: Path) -> None:
    assert limits.check(read_file(path).data) == []
