"""citegraph.bench."""
