"""The user-data RL demo's own reward (configs/rl/arith.toml), beside the built-in math_answer:
partial credit for a sum that is close, so a model that is nearly right learns which way to go.

Each reward is called as fn(completion, **row); the demo's rows have an `answer` column (the
assistant's message of each conversation in train.jsonl).
"""


def close(completion: str, answer: str) -> float:
    """1 for the right sum, falling by 0.1 per unit off, 0 for no number at all."""
    try:
        guess = int(completion.strip())
    except ValueError:
        return 0.0
    return max(0.0, 1.0 - abs(guess - int(answer)) / 10)
