"""citegraph.validator."""
