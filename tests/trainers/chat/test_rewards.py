"""Reward functions by name: the built-ins, import paths and local files, sync and async, the
weighted sum, which row columns reach a function, and every refusal with its config path."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import textwrap

import pytest

from trainspec.trainers.chat import named_rewards
from trainspec.trainers.chat.named_rewards import (
    BUILTIN_REWARDS,
    RewardError,
    resolve_reward,
    reward_name,
)
from trainspec.trainers.chat.rewards import Reward, Rewards
from trainspec.trainers.chat.tasks import reverse_text
from trainspec.trainers.errors import SetupError

WHERE = "orchestrator.train.source[0].reward[1]"


def write_module(tmp_path, monkeypatch, name: str, body: str) -> None:
    """A module `name` in tmp_path, importable for this test only."""
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


def score(rewards: Rewards, completion: str, row: dict) -> tuple[float, dict[str, float]]:
    return asyncio.run(rewards.score(completion, row))


# ---- built-ins --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, completion, answer, expected",
    [
        ("exact_match", "  olleh\n", "olleh", 1.0),
        ("exact_match", "olle h", "olleh", 0.0),
        ("lcs_ratio", "abcd", "abd", 0.75),  # LCS "abd" over the longer length 4
        ("lcs_ratio", "xyz", "abc", 0.0),
        ("math_answer", r"\boxed{1/2}", "0.5", 1.0),  # math-verify compares values, not text
        ("math_answer", r"The answer is $\frac{1}{2}$.", "0.5", 1.0),
        ("math_answer", r"first 3, then \boxed{7}", "7", 1.0),  # the final answer counts
        ("math_answer", r"so the answer is \boxed{3}", "0.5", 0.0),
        ("math_answer", r"\boxed{1/2}", "1/3", 0.0),
        ("math_answer", "no number here", "0.5", 0.0),
        ("math_answer", r"\boxed{2}", 2, 1.0),  # a numeric answer column
    ],
)
def test_builtin_rewards_on_hand_cases(name, completion, answer, expected):
    fn = resolve_reward(name, WHERE)
    value = fn(completion, answer=answer)
    assert type(value) is float and value == pytest.approx(expected)


def test_builtins_reuse_the_reverse_text_scores(monkeypatch):
    monkeypatch.setattr(reverse_text, "lcs_ratio", lambda completion, target: 0.25)
    monkeypatch.setattr(reverse_text, "exact_match", lambda completion, target: True)
    assert BUILTIN_REWARDS["lcs_ratio"]("a", answer="b") == 0.25
    assert BUILTIN_REWARDS["exact_match"]("a", answer="b") == 1.0


def test_math_answer_works_off_the_main_thread():
    """math-verify's own timeouts need the main thread; elsewhere they are switched off."""
    fn = resolve_reward("math_answer", WHERE)
    assert asyncio.run(asyncio.to_thread(fn, r"\boxed{1/2}", answer="0.5")) == 1.0


def test_math_answer_without_math_verify_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "math_verify", None)  # import math_verify now fails
    with pytest.raises(RewardError) as caught:
        resolve_reward("math_answer", WHERE)
    assert caught.value.where == WHERE
    assert "pip install math-verify" in str(caught.value)
    assert "trainspec[train]" in str(caught.value)
    with pytest.raises(ImportError, match="pip install math-verify"):
        named_rewards.math_answer(r"\boxed{1}", answer="1")


def test_the_module_imports_without_loading_math_verify():
    code = "import sys, trainspec.trainers.chat.rewards; print('math_verify' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- resolving your own functions --------------------------------------------------------------


@pytest.mark.parametrize("spec", ["my_rewards_a:has_yes", "my_rewards_a.has_yes"])
def test_import_path_to_a_function(tmp_path, monkeypatch, spec):
    write_module(
        tmp_path,
        monkeypatch,
        "my_rewards_a",
        """
        def has_yes(completion, **row):
            return 1.0 if "yes" in completion else 0.0
        """,
    )
    fn = resolve_reward(spec, WHERE)
    assert fn is sys.modules["my_rewards_a"].has_yes
    assert (fn("oh yes"), fn("no")) == (1.0, 0.0)


def test_import_path_to_a_method_of_a_class(tmp_path, monkeypatch):
    write_module(
        tmp_path,
        monkeypatch,
        "my_rewards_b",
        """
        class Judge:
            @staticmethod
            def length(completion):
                return len(completion)
        """,
    )
    assert resolve_reward("my_rewards_b:Judge.length", WHERE)("abc") == 3


def test_local_file_path_relative_to_root_and_absolute(tmp_path):
    (tmp_path / "scores").mkdir()
    (tmp_path / "scores" / "mine.py").write_text("def short(completion):\n    return 7.0\n")
    relative = resolve_reward("scores/mine.py:short", WHERE, root=tmp_path)
    absolute = resolve_reward(f"{tmp_path}/scores/mine.py:short", WHERE)
    assert relative("x") == 7.0
    assert absolute is relative  # the same file is loaded once


def test_reward_names_for_metrics():
    assert reward_name("math_answer") == "math_answer"
    assert reward_name("pkg.mod:fmt_ok") == "fmt_ok"
    assert reward_name("pkg.mod.fmt_ok") == "fmt_ok"
    assert reward_name("dir/file.py:fmt_ok") == "fmt_ok"
    assert reward_name("pkg.mod:Judge.length") == "length"


# ---- calling: async, weights, row columns ------------------------------------------------------


def test_async_function_and_awaitable_result():
    async def judged(completion, answer):
        await asyncio.sleep(0)
        return 0.5 if completion == answer else 0.0

    def later(completion):  # a sync function that hands back an awaitable
        return judged(completion, answer=completion)

    rewards = Rewards([Reward("judged", judged), Reward("later", later)])
    assert score(rewards, "42", {"answer": "42"}) == (1.0, {"judged": 0.5, "later": 0.5})
    assert score(rewards, "41", {"answer": "42"}) == (0.5, {"judged": 0.0, "later": 0.5})


def test_weighted_sum_of_two_functions(tmp_path, monkeypatch):
    write_module(
        tmp_path,
        monkeypatch,
        "my_rewards_c",
        """
        def has_yes(completion):
            return 1.0 if "yes" in completion else 0.0

        async def tenths(completion):
            return len(completion) / 10
        """,
    )
    rewards = Rewards.resolve(
        ["my_rewards_c:has_yes", "my_rewards_c:tenths"], [1.0, 0.5], where="source[0].reward"
    )
    total, each = score(rewards, "yes!", {})
    assert each == {"has_yes": 1.0, "tenths": 0.4}
    assert total == pytest.approx(1.0 * 1.0 + 0.5 * 0.4)  # 1.2
    assert rewards.score_sync("nope", {}) == (
        pytest.approx(0.5 * 0.4),
        {"has_yes": 0.0, "tenths": 0.4},
    )


def test_weights_default_to_one_each():
    rewards = Rewards.resolve(["exact_match", "lcs_ratio"], where="reward")
    assert [r.weight for r in rewards.rewards] == [1.0, 1.0]
    assert rewards.score_sync("abcd", {"answer": "abd"}) == (
        0.75,
        {"exact_match": 0.0, "lcs_ratio": 0.75},
    )


def test_only_the_columns_a_signature_names_are_passed():
    seen: dict[str, dict] = {}

    def named(completion, answer, hint="none"):
        seen["named"] = {"answer": answer, "hint": hint}
        return 1.0

    def keyword_only(text, *, answer):
        seen["keyword_only"] = {"text": text, "answer": answer}
        return 1.0

    def everything(completion, **row):
        seen["everything"] = row
        return 1.0

    row = {"answer": "a", "prompt": "p", "id": 3, "completion": "stale"}
    rewards = Rewards(
        [
            Reward("named", named),
            Reward("keyword_only", keyword_only),
            Reward("everything", everything),
        ]
    )
    assert score(rewards, "c", row)[0] == 3.0
    assert seen["named"] == {"answer": "a", "hint": "none"}
    assert seen["keyword_only"] == {"text": "c", "answer": "a"}
    # **row gets every column except one named like the completion's own parameter
    assert seen["everything"] == {"answer": "a", "prompt": "p", "id": 3}


def test_a_column_the_function_needs_but_the_row_lacks():
    def needs(completion, answer, level):
        return 1.0

    rewards = Rewards([Reward("needs", needs, where=WHERE)])
    with pytest.raises(RewardError) as caught:
        score(rewards, "c", {"answer": "a"})
    assert caught.value.where == WHERE
    assert str(caught.value).startswith(f"{WHERE}: reward 'needs' needs the column 'level'")
    assert "it has: 'answer'" in str(caught.value)


# ---- refusals ----------------------------------------------------------------------------------


BROKEN_MODULES = {
    "my_broken_dep": "import not_installed_dep_xyz\n\ndef f(completion):\n    return 1.0\n",
    "my_broken_raise": "raise RuntimeError('bad config')\n",
    "my_rewards_d": "LIMIT = 3\n\ndef fmt_ok(completion):\n    return 1.0\n",
}


@pytest.mark.parametrize(
    "spec, problem, fix",
    [
        ("", "the reward is empty", "name one"),
        ("exact_matsh", "'exact_matsh' is not a built-in reward", "exact_match, lcs_ratio"),
        ("not_a_pkg_xyz.mod:f", "no module named 'not_a_pkg_xyz.mod'", "PYTHONPATH"),
        ("my_rewards_d:", "names no function", "package.module:function"),
        ("my_rewards_d:fmt_okk", "my_rewards_d has no attribute 'fmt_okk'", "defines: fmt_ok"),
        ("my_rewards_d.LIMIT", "my_rewards_d.LIMIT is of type int, not a function", "a float"),
        ("my_broken_dep:f", "no module named 'not_installed_dep_xyz'", "install not_installed"),
        ("my_broken_raise:f", "importing my_broken_raise raised RuntimeError: bad config", "fix"),
        ("nowhere/file.py:f", "no file", "check the path"),
        ("scores.py", "'scores.py' names a file but no function", "scores.py:function"),
    ],
)
def test_resolve_refusals_say_what_where_and_how(tmp_path, monkeypatch, spec, problem, fix):
    for name, body in BROKEN_MODULES.items():
        write_module(tmp_path, monkeypatch, name, body)
    with pytest.raises(RewardError) as caught:
        resolve_reward(spec, WHERE, root=tmp_path)
    error = caught.value
    assert isinstance(error, ValueError) and isinstance(error, SetupError)
    assert error.where == WHERE and str(error).startswith(f"{WHERE}: ")
    assert problem in error.problem
    assert fix in error.fix
    assert error.render().startswith(f"{WHERE}: error: ")


def test_a_function_that_raises_is_reported_by_name_and_where():
    def fragile(completion, answer):
        return 1.0 / len(answer)

    rewards = Rewards([Reward("fragile", fragile, where=WHERE)])
    with pytest.raises(RewardError) as caught:
        score(rewards, "c", {"answer": ""})
    assert caught.value.where == WHERE
    assert "reward 'fragile' raised ZeroDivisionError" in str(caught.value)
    assert isinstance(caught.value.__cause__, ZeroDivisionError)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, None, "1.0", [1.0]])
def test_a_result_that_is_not_a_finite_number_is_refused(value):
    rewards = Rewards([Reward("odd", lambda completion: value, where=WHERE)])
    with pytest.raises(RewardError) as caught:
        score(rewards, "c", {})
    assert str(caught.value).startswith(f"{WHERE}: reward 'odd' returned {value!r}, not a finite")


@pytest.mark.parametrize("value, expected", [(True, 1.0), (2, 2.0), (0.25, 0.25)])
def test_bools_and_ints_count_as_numbers(value, expected):
    rewards = Rewards([Reward("plain", lambda completion: value)])
    assert score(rewards, "c", {}) == (expected, {"plain": expected})


def test_a_function_without_a_completion_parameter_is_refused_when_built():
    def no_completion(*, answer):
        return 1.0

    with pytest.raises(RewardError) as caught:
        Reward("no_completion", no_completion, where=WHERE)
    assert caught.value.where == WHERE
    assert "takes no positional argument for the completion" in caught.value.problem


def test_weights_must_match_and_be_finite():
    with pytest.raises(RewardError) as caught:
        Rewards.resolve(["exact_match", "lcs_ratio"], [1.0], where="source[0].reward")
    assert str(caught.value).startswith("source[0].reward: 2 reward functions but 1 weights")
    with pytest.raises(RewardError) as caught:
        Rewards.resolve(["exact_match"], [math.nan], where="source[0].reward")
    assert caught.value.where == "source[0].reward[0]" and "not finite" in caught.value.problem


def test_two_rewards_with_one_name_are_refused():
    with pytest.raises(RewardError) as caught:
        Rewards.resolve(["lcs_ratio", "lcs_ratio"], [1.0, 0.5], where="reward")
    assert caught.value.where == "reward[1]"
    assert "two rewards are named 'lcs_ratio' (also reward[0])" in caught.value.problem


def test_no_rewards_at_all_is_refused():
    with pytest.raises(RewardError, match="no reward function is given"):
        Rewards.resolve([], where="reward")
