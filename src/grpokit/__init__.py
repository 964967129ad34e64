"""grpokit: GRPO reinforcement fine-tuning with verifiable rewards, around TRL."""
__version__ = "0.1.0"
# The demo's end-to-end time on a 2-core CPU, as shown to users: the range of the runs docs/measurements.md
# "The demo: an SFT warm start, then GRPO" logs (seed 0: 4.1 min on a Xeon with AMX, 2026-12-06; 9.6 min on an AMD
# EPYC with AVX2 only, 2026-12-07, the latest). The one place it is written: `grpokit demo --help`,
# scripts/install.sh, the demo recipe's comment, README.md "What `grpokit demo` prints, and how to read it", the
# quickstart and docs/recipes/index.md show this text
# (tests/test_docs.py checks); change it with a new measurement.
DEMO_TIME = "4-10 min"
