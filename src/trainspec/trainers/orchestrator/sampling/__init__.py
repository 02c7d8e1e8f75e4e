"""Where the orchestrator's completions come from: the Sampler protocol and its Completion
(sampler.py, with the prefill a prompt's completions share), the policy in process
(local_sampler.py), any OpenAI-compatible server (openai_client.py), how many episodes are in
flight (inflight.py, with the engines' load in engine_load.py), frozen models behind endpoints
you started (frozen.py), and a small local model server (model_server.py, http_server.py) for a
frozen model when no vLLM is at hand."""
