-- deermem schema version 4: the store's own settings (docs/policies.md), what a
-- Markdown store keeps in its deermem.yaml: one row per setting the store
-- records, its value as JSON text. Per database, not per user: every user and
-- agent of the store runs under them, below any explicit configuration.
--
-- deermem records them when it creates the store: `deermem db upgrade` on a
-- database that holds no user yet writes a new store's settings (hybrid-v1,
-- confidence in its shadow, and the configuration's own choices); a database
-- that already holds users gets no row, so it keeps running as it did.
-- `deermem migrate` carries them. Never a secret, never a database address.

CREATE TABLE deermem_settings (
    name   text PRIMARY KEY,             -- a MemoryConfig key
    value  text NOT NULL                 -- its value, JSON
);
