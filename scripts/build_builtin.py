"""Write the built-in tiny model's files: a Qwen3-style config.json and a byte-level tokenizer.

    python scripts/build_builtin.py           # rewrite src/trainspec/trainers/builtin/tiny-qwen3
    python scripts/build_builtin.py --check   # exit 1 when the shipped files differ

The tokenizer is built offline with the `tokenizers` library: one token per byte (256) plus four
specials, and a ChatML chat template. Weights are not shipped: the trainer initialises them from a
seed on first use (`trainspec.trainers.core.model`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "src/trainspec/trainers/builtin/tiny-qwen3"

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

MODEL_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": 256 + len(SPECIALS),
    "hidden_size": 128,
    "intermediate_size": 384,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "hidden_act": "silu",
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
    "attention_bias": False,
    "bos_token_id": 256,
    "eos_token_id": 258,
    "pad_token_id": 259,
    "dtype": "float32",
}


def build_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    byte_to_char = sorted(alphabet)
    # Token id = byte value: order the alphabet the way ByteLevel maps bytes 0..255.
    mapping = _bytes_to_unicode()
    vocab = {mapping[b]: b for b in range(256)}
    assert set(vocab) == set(byte_to_char)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        chat_template=CHAT_TEMPLATE,
        model_max_length=MODEL_CONFIG["max_position_embeddings"],
    )
    fast.save_pretrained(out)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte → printable character table, which ByteLevel uses."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    (out / "config.json").write_text(json.dumps(MODEL_CONFIG, indent=2, sort_keys=True) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare with the shipped files")
    args = parser.parse_args()
    if not args.check:
        build(TARGET)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp))
        stale = [
            p.name
            for p in sorted(Path(tmp).iterdir())
            if not (TARGET / p.name).exists() or (TARGET / p.name).read_bytes() != p.read_bytes()
        ]
    if stale:
        print(f"built-in assets are stale: {', '.join(stale)}; run scripts/build_builtin.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
