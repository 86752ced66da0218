"""The bounds of a Context Brief's ``--budget-tokens`` (SPEC §8), in a module of their own
so that the CLI can show them without importing the memory layer."""

MIN_BUDGET = 800
MAX_BUDGET = 1500
DEFAULT_BUDGET = 1250
