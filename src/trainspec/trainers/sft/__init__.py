"""The SFT trainer.

main.py          the `sft` command: validate, then train here or under torchrun
train.py         the loop, top to bottom, on the run skeleton (../parts.py, ../session.py)
data.py          training and validation batches; packing.py packs rows into sequences
online_evals.py  [eval]: when, and on which weights; eval_server.py the vLLM it starts
refusals.py      what an SFT run refuses at start (its online evals' settings too)
deployment.py    nodes and processes of [deployment]; worker.py a torchrun worker
slurm_job.py     the job `sft` submits with [slurm]
held_out.py      held-out accuracy on a built-in task, for the closing line
"""
