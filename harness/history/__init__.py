"""The history of runs: a SQLite database of each record's summary columns (`db.py`, its
tables and migrations `schema.py`, the columns derived from the record's declaration
`summary.py`), read by `harness compare --history`, the trends and the site."""
