"""citegraph.corpora: the labeled corpus of SPEC §13 (cases/*.toml), its runner
(``python -m citegraph.corpora run``) and the mutation run over the validator's decision
tables (``python -m citegraph.corpora.mutation``). See docs/corpus.md and docs/mutation.md."""
