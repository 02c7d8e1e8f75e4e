"""The RL orchestrator: samples completions from the policy, scores them, feeds the trainer.

main.py          the `orchestrator` command
loop.py          the loop, top to bottom, on the run skeleton (../session.py)
policy.py        the newest weights the trainer broadcast, and the sampler that serves them
sources.py       the train and eval sources of [orchestrator.train/eval.source]
step_batch.py    one step's batch: which prompts it plays (the pickers), and their samples
learners.py      what each `algo` learns from a scored group, built from its table
algorithms.py    the reward-based algos: their advantages and their learner (Rewarded)
evals.py         evaluating eval sources (the orchestrator's, and sft's online evals)
refusals.py      what the orchestrator refuses at start
rl_plot.py       the picture of an RL run (rl.png)
sampling/        where completions come from: in process, a server, frozen models
environments/    what sources play: built-in tasksets, your data, verifiers environments
"""
