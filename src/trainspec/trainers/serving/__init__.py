"""Servers a command starts, watches and stops. server_process.py is the one way a server
process is started and stopped (its own session and log; TERM, then KILL; always reaped), for
the vLLM server of `[inference]` and the orchestrator's environment servers. The vLLM server:
its plan (command, flags, environment, address) in vllm_plan.py, the GPU split between it and
the trainer in gpus.py, the process in inference_server.py, used by `rl`, `sft`'s online evals
and SLURM jobs. New policy weights reach it through vLLM's own reload
(orchestrator/sampling/vllm_reload.py)."""
