"""The Python API (`load`, `validate`) on bad input: a bad file is a ConfigFileError, a bad
value a ConfigError with located issues, a misuse of the API a TypeError that says what to
pass; never a bare OSError, RecursionError or ValueError."""

from __future__ import annotations

import decimal
from pathlib import Path

import pytest

from trainspec.config import ConfigError, ConfigFileError, load, validate
from trainspec.config import sources as sources_module

RL = "#:schema ../schema/rl_trainer.json\n"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(RL + "max_steps = 5\n")
    return path


@pytest.mark.parametrize("as_path", [False, True], ids=["str", "Path"])
def test_one_path_instead_of_a_list_is_a_type_error(config: Path, as_path: bool) -> None:
    one = config if as_path else str(config)
    with pytest.raises(TypeError, match=r"files must be a list of paths, not one") as err:
        load("rl", one)  # type: ignore[arg-type]
    assert f"load(kind, [{one!r}])" in str(err.value)


def test_a_list_of_one_path_loads(config: Path) -> None:
    assert load("rl", [config]).config.max_steps == 5
    assert load("rl", (str(config),)).config.max_steps == 5


@pytest.mark.parametrize("bad", [[3], [b"run.toml"], [None]], ids=["int", "bytes", "None"])
def test_a_path_of_another_type_is_a_type_error(bad: list) -> None:
    with pytest.raises(TypeError, match="each file must be a str or os.PathLike"):
        load("rl", bad)


def test_files_that_is_not_iterable_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="files must be a list of paths; got int"):
        load("rl", 3)  # type: ignore[arg-type]


def test_overrides_that_are_not_a_mapping_are_a_type_error(config: Path) -> None:
    with pytest.raises(TypeError, match="overrides must be a mapping of dotted keys"):
        load("rl", [config], [("max_steps", 3)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="override keys are dotted strings"):
        load("rl", [config], {3: 4})  # type: ignore[dict-item]


def test_validate_needs_a_mapping() -> None:
    with pytest.raises(TypeError, match="data must be a mapping of settings"):
        validate("rl", "max_steps = 3")  # type: ignore[arg-type]


def test_an_unreadable_file_is_a_config_file_error(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(sources_module.os, "open", denied)
    with pytest.raises(ConfigFileError) as err:
        load("rl", [config])
    assert err.value.path == str(config)
    assert err.value.message.startswith("permission denied; make it readable")


def test_a_directory_is_a_config_file_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match="is a directory"):
        load("rl", [tmp_path])


def test_deep_values_are_a_config_error_not_a_recursion_error() -> None:
    deep: dict = {}
    current = deep
    for _ in range(5000):
        current["a"] = {}
        current = current["a"]
    with pytest.raises(ConfigError) as err:
        load("rl", [], {"loss.type": "custom", "loss.import_path": "m.f", "loss.kwargs": deep})
    (issue,) = err.value.errors
    assert issue.message == "is nested more than 24 levels deep"
    assert issue.flag == "--loss.kwargs"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (2**70, "is outside the 64-bit integer range: 1180591620717411303424"),
        (float("nan"), "must be a finite number, got nan"),
        (decimal.Decimal("1.5"), "is a Python Decimal, which no config file can hold"),
        ({1, 2}, "is a Python set, which no config file can hold"),
    ],
    ids=["2**70", "nan", "Decimal", "set"],
)
def test_bad_values_are_config_errors(value, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load("rl", [], {"max_steps": value})
    (issue,) = err.value.errors
    assert (issue.path, issue.message, issue.flag) == ("max_steps", message, "--max_steps")
    with pytest.raises(ConfigError) as err:
        validate("rl", {"max_steps": value})
    assert [e.message for e in err.value.errors] == [message]


def test_a_key_that_is_not_a_string_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        validate("rl", {"loss": {"type": "custom", "import_path": "m.f", "kwargs": {1: 2}}})
    (issue,) = err.value.errors
    assert issue.path == "loss.kwargs"
    assert issue.message == "has a key that is not a string: 1 (int)"


def test_a_tuple_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError) as err:
        validate("rl", {"model": {"lora": {"target_modules": ("q_proj",)}}})
    (issue,) = err.value.errors
    assert issue.path == "model.lora.target_modules"
    assert issue.message == "is a Python tuple, which no config file can hold"
    assert issue.fix == "pass a list instead of a tuple"


def test_overrides_never_change_the_callers_dicts(config: Path) -> None:
    optim = {"lr": 1e-5}
    overrides = {"optim": optim, "optim.max_norm": None}
    resolved = load("rl", [config], overrides).config
    assert resolved.optim.lr == 1e-5 and resolved.optim.max_norm is None
    assert optim == {"lr": 1e-5}
