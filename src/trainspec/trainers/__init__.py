"""The torch side of trainspec: the SFT and RL trainers, the RL orchestrator, and what they share.

The commands, each a package (main.py the command; the loop reads top to bottom):

    sft/               the SFT trainer (`sft`)
    rl/                the RL trainer (`rl-trainer`)
    orchestrator/      the RL orchestrator (`orchestrator`): sampling/, environments/
    rl_run/            `rl`: the trainer and the orchestrator from one config, two processes

What they share, by role (each package imports only from those listed below it; tests/
test_layers.py keeps it so, counting the imports inside functions):

    slurm/             what every [slurm] job shares (each command builds its own job)
    parts.py           what both trainers train with (tokenizer, model, optimizer, schedule, ckpt)
    session.py         what every loop does around a step (metrics, saves, stops, the end)
    serving/           the vLLM server of [inference], and its weight-update worker extension
    wire/              trainer <-> orchestrator: rollout batches, transports, weight broadcasts
    refusals.py        refusals at start shared by several commands (each has its refusals.py)
    chat/              chat data: rows, rendering, named renderers, built-in tasks, rewards
    ckpt/              checkpoints and the Hugging Face export of the weights
    core/              world, model and its head, parallelism, optimizer, schedule, tokenizer
    run/, process/     run directory, monitor, console, heartbeat, control, gc, profiler,
                       plot; setup-error guard, signal flags, malloc, exit, torchrun launcher
    errors.py, builtin/  the errors a command reports; the tiny model (nothing downloaded)

Each component is built from its own sub-config (`build_optimizer(config.optim, ...)`).
Nothing here is imported by the config layer, which stays free of torch.
"""
