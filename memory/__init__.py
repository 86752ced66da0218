"""citegraph.memory."""
