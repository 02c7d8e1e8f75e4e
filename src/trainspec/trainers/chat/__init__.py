"""Chat data, shared by `sft`, the orchestrator and online evals: rows and where they come
from (row_sources.py, row_checks.py, layouts.py), rendering them to token ids (render.py, the
reference's named renderers in named_renderers.py, prompts in prompts.py), the built-in tasks
(tasks/) and the rewards that score completions (named_rewards.py, weighted in rewards.py)."""
