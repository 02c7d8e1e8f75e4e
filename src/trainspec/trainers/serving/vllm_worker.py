"""trainspec's vLLM worker extension: new policy weights from a broadcast directory, in place.

    vllm serve <model> --worker-extension-cls trainspec.trainers.serving.vllm_worker.WeightUpdate
    POST /collective_rpc {"method": "update_weights_from_path", "args": ["<weights dir>"]}

vLLM mixes this class into every GPU worker; `/collective_rpc` (served when
VLLM_SERVER_DEV_MODE=1, which `rl` sets) calls the method on each of them. The worker hands the
Hugging Face tensors of the directory (model.safetensors, or the shards its index names) to the
model's own `load_weights`, which maps them to vLLM's layout and shards them for tensor
parallelism, as when the engine started. Nothing here imports vLLM: the class only uses the
`model_runner` attribute vLLM's worker has.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path


def safetensors_files(weights_dir: Path) -> list[Path]:
    index = weights_dir / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [weights_dir / name for name in names]
    single = weights_dir / "model.safetensors"
    if single.is_file():
        return [single]
    raise FileNotFoundError(f"{weights_dir} has neither model.safetensors nor its index")


def iter_tensors(weights_dir: Path, device: str = "cpu") -> Iterator[tuple[str, object]]:
    """(name, tensor) of every tensor in the directory, one file open at a time."""
    from safetensors import safe_open

    for path in safetensors_files(weights_dir):
        with safe_open(str(path), framework="pt", device=device) as f:
            for name in f.keys():  # noqa: SIM118 (safe_open is not a dict)
                yield name, f.get_tensor(name)


class WeightUpdate:
    """Mixed into vLLM's workers, which provide `model_runner`."""

    model_runner: object

    def update_weights_from_path(self, path: str) -> int:
        """Load the weights in `path` into this worker's model; the number of tensors read."""
        model = self.model_runner.model  # type: ignore[attr-defined]  # vLLM's worker has it
        count = 0

        def counted() -> Iterator[tuple[str, object]]:
            nonlocal count
            for item in iter_tensors(Path(path)):
                count += 1
                yield item

        model.load_weights(weights=counted())
        return count
