"""citegraph.indexer."""
