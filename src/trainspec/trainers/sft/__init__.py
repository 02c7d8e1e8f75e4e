"""The SFT trainer: `main.py` (the `sft` command), `train.py` (the loop), `data.py` (batches)."""
