"""The memory store and its lifecycle: the DuckDB store, its transactions, the observation cache, legacy import."""
