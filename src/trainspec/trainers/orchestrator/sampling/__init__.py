"""Where the orchestrator's completions come from: the Sampler protocol and its Completion
(sampler.py), the policy in process (local_sampler.py, with shared_prefill.py), any
OpenAI-compatible server (openai_client.py), how many episodes are in flight (inflight.py, with
the engines' load in engine_load.py), frozen models behind endpoints you started (frozen.py),
and a small local model server (model_server.py, http_server.py) for a frozen model when no
vLLM is at hand."""
