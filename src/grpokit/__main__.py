"""`python -m grpokit ...`: the same as the `grpokit` command."""
import sys

from grpokit.cli import main

sys.exit(main())
