"""`python -m grpokit.cli ...`: the same as the `grpokit` command."""
import sys

from grpokit.cli import main

sys.exit(main())
