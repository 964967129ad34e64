"""grpokit: GRPO reinforcement fine-tuning with verifiable rewards, around TRL."""
__version__ = "0.1.0"
# The demo's end-to-end time on a 2-core CPU, as shown to users: the range of the runs docs/measurements.md
# "The demo: an SFT warm start, then GRPO" logs. The one place it is written: `grpokit demo --help`, scripts/install.sh, the demo recipe's
# comment, README.md "What `grpokit demo` prints, and how to read it" and the quickstart show this text
# (tests/test_docs.py checks); change it with a new measurement.
DEMO_TIME = "5-7 min"
