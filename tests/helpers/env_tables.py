"""A source's `env` and `serve` tables with every typed setting written (ENV_TABLES,
SERVE_TABLES: each runtime, interception, client and pool variant in one of them), and the
leaves they set. tests/config/test_env_schema.py proves that each reaches verifiers' own config
with every value written and that together they set every leaf of the schema's tables; the
field-coverage tests count those leaves as handed to verifiers (`handed_to_verifiers`), as they
count the renderers package's settings."""

from __future__ import annotations

from typing import Any

from trainspec.config.schema_info import SchemaInfo, schema_info

TASKSET = "trainspec-reverse-text"  # trainspec's own verifiers taskset (src/trainspec_reverse_text)
# Defaults trainspec chooses over verifiers' on purpose (the env-table walk's path -> trainspec's
# value): each is said in the docs' differences from prime-rl (test_env_defaults.py), and
# verifiers_config.env_config hands it to verifiers.
OWN_DEFAULTS = {"EnvConfig.timeout.episode": 3600.0}
CLIENT = {
    "base_url": "http://endpoint/v1",
    "api_key_var": "ENDPOINT_KEY",
    "headers": {"X-Team": "rl"},
    "headers_from_env": {"X-Token": "TOKEN_VAR"},
    "timeout": {"connect": 1.0, "read": 2.0, "write": 3.0, "pool": 4.0},
}
SAMPLING = {"temperature": 0.5, "top_p": 0.9, "reasoning_effort": "low", "max_tokens": 64}
FUNCTION = {"fn": "plugged.py:function", "priority": 2}
ENV_TABLES: list[dict[str, Any]] = [
    {
        "id": "single-agent",
        "taskset": {
            "id": TASKSET,
            "system_prompt": "prompt.txt",
            "turns": 2,  # the taskset's own setting
            "task": {
                "judges": [
                    {"id": "reference", **CLIENT, "name": "ref", "weight": 0.5,
                     "model": "judge-model", "sampling": SAMPLING, "prompt": "judge.txt"}
                ],
                "stops": {"done": FUNCTION},
                "metrics": {"length": FUNCTION},
                "rewards": {"lcs_ratio": {**FUNCTION, "weight": 2.0}},
            },
        },
        "timeout": {"episode": 60.0, "finalize": 5.0},
        "retries": {
            "max_retries": 2,
            "rules": [{"type": "ProviderError", "status_code": [429, "5xx"], "message": "rate",
                       "max_retries": 3}],
        },
        "max_concurrent_agents": None,
        "interception": {
            "type": "server",
            "tunnel": {"type": "custom", "url": "http://tunnel", "port": 9000},
        },
        "agent": {
            "harness": {"id": "null", "env": {"A": "1"}, "forward_env": ["B"],
                        "mcp_header_env": {"search": {"X-Key": "C"}}, "tool_timeout": 30.0,
                        "disabled_tools": ["shell"], "skills": ["skills", {"runtime": "/r"}]},
            "runtime": {"type": "docker", "image": "python:3.12", "workdir": "/w", "cpu": 2.0,
                        "memory": 4.0, "gpu": "1", "disk": 9.0, "allow": ["example.com"]},
            "model": "agent-model",
            "client": {"type": "train", **CLIENT, "renderer_model_name": "base-model",
                       "renderer": {"name": "qwen3", "thinking_retention": "all",
                                    "enable_thinking": False},
                       "multiplex": 8},
            "sampling": {**SAMPLING, "top_k": 5},  # a provider's own key passes through
            "max_turns": 3,
            "max_input_tokens": 10,
            "max_output_tokens": 11,
            "max_total_tokens": 12,
            "timeout": {"setup": 1.0, "rollout": 2.0, "finalize": 3.0, "scoring": 4.0},
            "retries": {"max_retries": 1, "rules": [{"max_retries": 0}]},
            "network_notice": False,
        },
    },
    {
        "taskset": {"id": TASKSET},
        "interception": {"type": "static", "servers": [{"type": "server"}]},
        "agent": {
            "runtime": {"type": "prime", "image": "python:3.12", "labels": ["run"],
                        "region": "us-east", "cpu": 2.0, "memory": 4.0, "gpu": "A100",
                        "disk": 9.0, "checkpoint": "ckpt", "idle_timeout": 60.0,
                        "creates_per_min": 30, "block": ["example.com"]},
            "client": {"type": "eval", **CLIENT},
        },
    },
    {
        "taskset": {"id": TASKSET},
        "interception": {"multiplex": 8},  # the default variant, elastic
        "agent": {"runtime": {"type": "modal", "vm": True, "network_access": False,
                              "region": "us-east", "creates_per_sec": 2.0}},
    },
    {"taskset": {"id": TASKSET}, "agent": {"runtime": {"type": "podman", "image": "py:3"}}},
    {"taskset": {"id": TASKSET}, "agent": {"runtime": {"type": "apptainer", "workdir": "/w"}}},
    {"taskset": {"id": TASKSET}, "agent": {"runtime": {"type": "e2b", "creates_per_sec": 2.0}}},
    {"taskset": {"id": TASKSET}, "agent": {"runtime": {"type": "subprocess"}}},
]  # fmt: skip
SERVE_TABLES: list[dict[str, Any]] = [
    {"pool": {"type": "static", "num_workers": 2}, "address": "tcp://h:1", "max_concurrent": 3},
    {"pool": {"max_workers": 4, "multiplex": 8}},  # the default variant, elastic
]
# Below this, the renderers package's own config: test_renderer_variants.py proves the schema's
# renderer.json is that package's (each variant's settings, types and defaults).
RENDERER = "env.agent.client.renderer."


def _source_schema() -> SchemaInfo:
    """What describes one [[eval.source]] table (the sources of every kind share it)."""
    info, _ = schema_info("sft").scope(("eval", "source", 0))
    return info


def set_leaves(table: dict[str, Any], name: str) -> set[str]:
    """The leaves of the source table `name` ("env", "serve") that `table` sets: its keys down
    to a setting, an array or a free-form table (as the field-coverage tests count leaves)."""
    info = _source_schema()
    found: set[str] = set()

    def walk(value: Any, path: tuple[str, ...]) -> None:
        if isinstance(value, dict) and info.children.get(path):
            for key, inner in value.items():
                if (*path, key) in info.keys:  # a plugin's own key is no leaf of the schema
                    walk(inner, (*path, key))
        else:
            found.add(".".join(path))

    walk(table, (name,))
    return found


def schema_leaves() -> set[str]:
    """Every leaf of a source's env and serve tables."""
    info = _source_schema()
    return {
        ".".join(path)
        for path in info.keys
        if path[0] in ("env", "serve") and not info.children.get(path)
    }


def handed_to_verifiers(prefix: str) -> dict[str, str]:
    """The leaves of the env and serve tables of the sources at `prefix` ("eval.source[]"),
    each with what proves that it reaches verifiers."""
    written = set().union(*(set_leaves(t, "env") for t in ENV_TABLES))
    written |= set().union(*(set_leaves(t, "serve") for t in SERVE_TABLES))
    handed = {}
    for leaf in schema_leaves():
        if leaf in written:
            handed[f"{prefix}.{leaf}"] = "test_env_schema.py's tables, set in one of them"
        elif leaf.startswith(RENDERER):
            handed[f"{prefix}.{leaf}"] = "the renderers package's config (renderer.json)"
    return handed
