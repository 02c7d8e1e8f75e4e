"""The torch side of trainspec: the SFT and RL trainers, the RL orchestrator, and what they share.

    sft/, rl/          one mode each: main.py (the command), train.py (the loop), its data
    orchestrator/      the RL sampler process; rl_run/ the `rl` command (both processes)
    parts.py           what both loops train with (tokenizer, model, optimizer, schedule, ckpt)
    session.py         what both loops do around a step (metrics, saves, stops, the end)
    preflight.py       every setting this build or device cannot honour, refused at start
    core/              world, model and its head, parallelism, optimizer, schedule, tokenizer
    ckpt/              checkpoints and the Hugging Face export of the weights
    run/               run directory, monitor, console, heartbeat, control, gc, profiler, plot
    process/           setup-error guard, signal flags, malloc tuning, process exit, the
                       torchrun launcher the commands run in their own process (workers.py)
    tasks/, builtin/   the built-in task and tiny model (nothing downloaded)

Each component is built from its own sub-config (`build_optimizer(config.optim, ...)`) and
imports only from the floors below it. Nothing here is imported by the config layer, which
stays free of torch.
"""
