"""The RL trainer: consumes rollouts through a transport (../wire/), trains with a policy loss,
and publishes weights back to the sampler.

    main.py          the `rl-trainer` command
    train.py         the loop, top to bottom, on the run skeleton (../parts.py, ../session.py),
                     and this rank's batches: the orchestrator's rollouts, or synthetic ones
    loss.py          the policy loss of [loss]
    refusals.py      what the RL trainer refuses at start
    token_export.py  every trained token as JSON lines (enable_token_export)
"""
