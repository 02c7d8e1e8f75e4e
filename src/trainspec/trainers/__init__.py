"""The torch side of trainspec: the SFT trainer and the components it shares with the RL trainer.

Each component module builds one part from its own sub-config (`build_optimizer(config.optim,
...)`); `sft/train.py` is the loop that wires them together. Nothing here is imported by the
config layer, which stays free of torch.
"""
