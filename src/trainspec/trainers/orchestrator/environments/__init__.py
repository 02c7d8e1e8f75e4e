"""What the orchestrator's sources play: the built-in tasksets (task.py), your own data and
reward (data_task.py), verifiers environments (verifiers_env.py; their config from a source's
`env` table in verifiers_config.py, their episodes as completions in episode_completions.py)
and the environment servers the orchestrator starts for them (env_servers.py)."""
