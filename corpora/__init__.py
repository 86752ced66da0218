"""citegraph.corpora."""
