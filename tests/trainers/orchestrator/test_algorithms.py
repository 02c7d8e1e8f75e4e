"""The advantage algorithms (grpo, max_rl, rae) on groups worked out by hand in the comments."""

from __future__ import annotations

import math

import pytest

from trainspec.trainers.orchestrator.algorithms import (
    Group,
    LinearLengthPenalty,
    RAEBaselines,
    group_advantages_for,
    grpo_advantages,
    max_rl_advantages,
)


def test_grpo_is_reward_minus_group_mean():
    # mean = (1 + 0 + 0.5 + 0.5) / 4 = 0.5
    assert grpo_advantages([1.0, 0.0, 0.5, 0.5]) == [0.5, -0.5, 0.0, 0.0]


def test_grpo_length_penalty_all_three_terms():
    # rewards [1, 0.5, 0], mean 0.5; weights 0.25 (output), 0.1 (input), 0.1 (turns)
    # output [100, 50, 200] / 200 = [0.5, 0.25, 1]
    # input  [40, 80, 80]   / 80  = [0.5, 1, 1]
    # turns  [1, 2, 4]      / 4   = [0.25, 0.5, 1]
    # sum w*x: s0 = 0.125 + 0.05 + 0.025 = 0.2      -> 1   - 0.5*0.2    = 0.9
    #          s1 = 0.0625 + 0.1 + 0.05 = 0.2125    -> 0.5 - 0.5*0.2125 = 0.39375
    #          s2 = 0.25 + 0.1 + 0.1 = 0.45         -> 0   - 0.5*0.45   = -0.225
    # centre = (0.9 + 0.39375 - 0.225) / 3 = 0.35625
    # advantages = [0.54375, 0.0375, -0.58125]
    advantages = grpo_advantages(
        [1.0, 0.5, 0.0],
        LinearLengthPenalty(),
        output_tokens=[100, 50, 200],
        input_tokens=[40, 80, 80],
        turns=[1, 2, 4],
    )
    assert advantages == pytest.approx([0.54375, 0.0375, -0.58125])


def test_grpo_length_penalty_clamps_group_max_to_one():
    # turns are all 0: max(1, 0) = 1, so the turns term is 0/1 = 0 (no division by zero).
    # rewards [1, 0, 0.5], mean 0.5; output [10, 0, 5] / 10 = [1, 0, 0.5], weight 0.25
    # penalised: 1 - 0.5*0.25*1 = 0.875, 0 - 0 = 0, 0.5 - 0.5*0.25*0.5 = 0.4375
    # centre = 1.3125 / 3 = 0.4375 -> [0.4375, -0.4375, 0]
    advantages = grpo_advantages(
        [1.0, 0.0, 0.5],
        LinearLengthPenalty(num_input_tokens_weight=0.0),
        output_tokens=[10, 0, 5],
        turns=[0, 0, 0],
    )
    assert advantages == pytest.approx([0.4375, -0.4375, 0.0])


def test_grpo_length_penalty_clamp_applies_below_one():
    # output [0.5, 0] has max 0.5, clamped to 1: fractions [0.5, 0], not [1, 0].
    # rewards [1, 1], mean 1; weight 1: penalised [1 - 0.5, 1] = [0.5, 1], centre 0.75
    penalty = LinearLengthPenalty(1.0, 0.0, 0.0)
    advantages = grpo_advantages([1.0, 1.0], penalty, output_tokens=[0.5, 0.0])
    assert advantages == pytest.approx([-0.25, 0.25])


def test_grpo_length_penalty_needs_counts_for_weighted_terms():
    with pytest.raises(ValueError, match=r"pass turns= for every sample"):
        grpo_advantages(
            [1.0, 0.0], LinearLengthPenalty(), output_tokens=[1, 2], input_tokens=[1, 2]
        )
    with pytest.raises(ValueError, match=r"output_tokens has 1 entries for 2 rewards"):
        grpo_advantages([1.0, 0.0], LinearLengthPenalty(0.1, 0.0, 0.0), output_tokens=[1])


@pytest.mark.parametrize(
    "field", ["num_output_tokens_weight", "num_input_tokens_weight", "num_turns_weight"]
)
@pytest.mark.parametrize("value", [-0.1, math.inf, math.nan])
def test_length_penalty_weights_are_finite_and_non_negative(field, value):
    with pytest.raises(ValueError, match=rf"^{field} must be a finite number >= 0, got "):
        LinearLengthPenalty(**{field: value})


def test_length_penalty_defaults():
    penalty = LinearLengthPenalty(num_turns_weight=0.0)  # zero is allowed
    assert (penalty.num_output_tokens_weight, penalty.num_input_tokens_weight) == (0.25, 0.1)


def test_max_rl_divides_by_the_mean():
    # mean = (3 + 1 + 2) / 3 = 2 -> [(3-2)/2, (1-2)/2, (2-2)/2]
    assert max_rl_advantages([3.0, 1.0, 2.0]) == [0.5, -0.5, 0.0]


@pytest.mark.parametrize("rewards", [[-1.0, 1.0], [-2.0, 0.0], [0.0, 0.0]])
def test_max_rl_is_zero_when_mean_is_not_positive(rewards):
    # means 0, -1, 0: no division, all zeros
    assert max_rl_advantages(rewards) == [0.0, 0.0]


def test_rae_scores_before_updating_and_keeps_keys_apart():
    rae = RAEBaselines(decay=0.5)
    a, b = ("kuhn", "player0"), ("kuhn", "player1")
    # call 1: a's baseline 0 -> advantage 1; then b_a = 0.5*0 + 0.5*1 = 0.5
    assert rae.advantages([1.0], [a]) == [1.0]
    assert rae.baseline(*a) == 0.5
    # call 2: a scores against 0.5 -> 0.5, then b_a = 0.5*0.5 + 0.5*1 = 0.75;
    #         b is untouched by a: baseline 0 -> advantage 0.5, then b_b = 0.25
    assert rae.advantages([1.0, 0.5], [a, b]) == [0.5, 0.5]
    assert (rae.baseline(*a), rae.baseline(*b)) == (0.75, 0.25)
    # the same agent in another env has its own baseline
    assert rae.baseline("other-env", "player0") == 0.0


def test_rae_same_key_twice_in_one_call_scores_in_order():
    rae = RAEBaselines(decay=0.5)
    # first 1.0 against 0 -> 1, baseline 0.5; second 1.0 against 0.5 -> 0.5, baseline 0.75
    assert rae.advantages([1.0, 1.0], [("e", "x"), ("e", "x")]) == [1.0, 0.5]
    assert rae.baseline("e", "x") == 0.75


def test_rae_decay_zero_is_last_reward():
    rae = RAEBaselines(decay=0.0)
    # baseline after each reward is that reward: 2 - 0 = 2, then 3 - 2 = 1
    assert [rae.score("e", "x", 2.0), rae.score("e", "x", 3.0)] == [2.0, 1.0]


@pytest.mark.parametrize("decay", [1.0, -0.01, 1.5])
def test_rae_decay_must_be_in_zero_one(decay):
    with pytest.raises(ValueError, match=rf"^decay must be in \[0, 1\), got {decay!r}$"):
        RAEBaselines(decay)


def test_rae_keys_must_match_rewards():
    with pytest.raises(ValueError, match=r"keys has 1 entries for 2 rewards"):
        RAEBaselines().advantages([1.0, 0.0], [("e", "x")])


def test_dispatch_grpo_and_max_rl():
    assert group_advantages_for("grpo")(Group([1.0, 0.0, 0.5, 0.5])) == [0.5, -0.5, 0.0, 0.0]
    # with the penalty of the clamp test above
    grpo = group_advantages_for("grpo", length_penalty=LinearLengthPenalty(1.0, 0.0, 0.0))
    assert grpo(Group([1.0, 1.0], output_tokens=[0.5, 0.0])) == pytest.approx([-0.25, 0.25])
    assert group_advantages_for("max_rl")(Group([3.0, 1.0, 2.0])) == [0.5, -0.5, 0.0]


def test_dispatch_rae_keeps_baselines_across_groups():
    rae = group_advantages_for("rae", decay=0.5)
    # 1 - 0 = 1 (baseline -> 0.5), then 1 - 0.5 = 0.5
    assert rae(Group([1.0], keys=[("e", "x")])) == [1.0]
    assert rae(Group([1.0], keys=[("e", "x")])) == [0.5]
    # a fresh function starts from 0 again
    assert group_advantages_for("rae", decay=0.5)(Group([1.0], keys=[("e", "x")])) == [1.0]
    with pytest.raises(ValueError, match=r"pass keys= for every sample"):
        rae(Group([1.0]))


def test_dispatch_rae_default_decay():
    rae = group_advantages_for("rae")
    # decay 0.95: 1 - 0 = 1, baseline 0.05; then 1 - 0.05 = 0.95
    rae(Group([1.0], keys=[("e", "x")]))
    assert rae(Group([1.0], keys=[("e", "x")])) == pytest.approx([0.95])


def test_dispatch_unknown_algo_lists_known_ones():
    with pytest.raises(ValueError, match=r"^unknown algo type 'ppo'; known: grpo, max_rl, rae$"):
        group_advantages_for("ppo")


@pytest.mark.parametrize(
    "algo_type, kwargs, message",
    [
        ("max_rl", {"length_penalty": LinearLengthPenalty()}, "length_penalty applies to grpo"),
        ("rae", {"length_penalty": LinearLengthPenalty()}, "length_penalty applies to grpo"),
        ("grpo", {"decay": 0.5}, "decay applies to rae only, not grpo"),
    ],
)
def test_dispatch_refuses_options_of_other_algorithms(algo_type, kwargs, message):
    with pytest.raises(ValueError, match=message):
        group_advantages_for(algo_type, **kwargs)


def test_empty_group_is_refused():
    with pytest.raises(ValueError, match=r"a group needs at least one reward"):
        grpo_advantages([])
    with pytest.raises(ValueError, match=r"a group needs at least one reward"):
        max_rl_advantages([])


# -- from an [orchestrator.algo] table ------------------------------------------------------


def algo_table(**algo):
    from trainspec.config import load

    return load("orchestrator", [], {"algo": algo} if algo else {}).config.algo


def test_an_algo_table_without_type_is_grpo():
    from trainspec.trainers.orchestrator.learners import from_config

    score = from_config(algo_table(), "orchestrator.algo")
    assert score(Group([1.0, 0.0, 0.5, 0.5])) == [0.5, -0.5, 0.0, 0.0]


def test_an_algo_table_with_a_length_penalty_passes_its_weights():
    from trainspec.trainers.orchestrator.learners import from_config

    # the hand-worked case above, through the config: weights 0.25 / 0.1 / 0.1
    table = algo_table(type="grpo", length_penalty={"type": "linear"})
    score = from_config(table, "orchestrator.algo")
    group = Group([1.0, 0.5, 0.0], [100, 50, 200], [40, 80, 80], [1, 2, 4])
    assert score(group) == pytest.approx([0.54375, 0.0375, -0.58125])
    only_output = algo_table(
        type="grpo",
        length_penalty={"num_output_tokens_weight": 1.0, "num_input_tokens_weight": 0.0,
                        "num_turns_weight": 0.0},
    )  # fmt: skip
    # rewards [1, 1], mean 1: output [10, 20] / 20 -> [0.5, 1]: [0.5, 0] centred
    assert from_config(only_output, "a")(Group([1.0, 1.0], [10, 20])) == [0.25, -0.25]


def test_max_rl_and_rae_tables():
    from trainspec.trainers.orchestrator.learners import from_config

    assert from_config(algo_table(type="max_rl"), "a")(Group([1.0, 0.0])) == [1.0, -1.0]
    rae = from_config(algo_table(type="rae", decay=0.5), "a")
    keys = [("env", "agent")]
    assert rae(Group([1.0], keys=keys)) == [1.0]  # baseline 0, then 0.5 * 0 + 0.5 * 1
    assert rae(Group([1.0], keys=keys)) == [0.5]


def test_hierarchical_grpo_is_refused_with_the_reason():
    from trainspec.trainers.errors import SetupError
    from trainspec.trainers.orchestrator.learners import from_config

    table = algo_table(type="hierarchical_grpo", episode_agents=["a"])
    with pytest.raises(SetupError) as caught:
        from_config(table, "orchestrator.train.source[1].algo")
    assert caught.value.path == "orchestrator.train.source[1].algo.type"
    assert "multi-agent" in caught.value.problem and caught.value.fix


def test_echo_scores_its_group_as_grpo_with_its_length_penalty():
    from trainspec.trainers.orchestrator.learners import from_config

    echo = from_config(algo_table(type="echo", length_penalty={"type": "linear"}), "a")
    group = Group([1.0, 0.5, 0.0], [100, 50, 200], [40, 80, 80], [1, 2, 4])
    assert echo(group) == pytest.approx([0.54375, 0.0375, -0.58125])  # the grpo case above
