"""Handwritten rules layered on the generated config classes: every cross-field rule lives here,
and only here (the schema states what one key may hold; the parity proof fails if it states a
rule between keys).

Each rule is a plain function ``rule(config, ctx)`` named after what it enforces; grep the name
to find it. Rules that check (``validate_*`` and plain rule names such as
``ep_only_with_custom_impl``) report errors through ``ctx.error`` with the dotted path, the
offending values and the fix. Rules that change values are resolutions (``resolve_*``): they set
values through ``ctx.resolve`` (so ``model_fields_set`` keeps meaning "written by the user") and
warn through ``ctx.warn`` whenever they change a value the user wrote.

The order lives in `pipeline.py`: model-level rules, then the shared trainer rules, then the
rules of the mode (`rl.py`, `sft.py`, `orchestrator.py`, `rl_run.py`). What each rule does is
stated, case by case, in tests/validators/rule_cases.toml, which the tests and the parity proof
run.
"""
