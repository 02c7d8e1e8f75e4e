"""Handwritten rules layered on the generated config classes.

Each rule is a plain function ``rule(config, ctx)`` named after what it enforces; grep the name
to find it. Rules that only check (``validate_*`` and plain rule names) report errors through
``ctx.error`` with the dotted path, the offending values and the fix. Rules that derive values
(``resolve_*``, ``auto_*``) fill unset or "auto" values silently, and warn through ``ctx.warn``
whenever they change a value the user could have set on purpose.

The order lives in `pipeline.py`: model-level rules, then the shared trainer rules, then the
rules of the mode (`rl.py`, `sft.py`).
"""
