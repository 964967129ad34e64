"""grpokit: GRPO reinforcement fine-tuning with verifiable rewards, around TRL."""
__version__ = "0.1.0"
