-- deermem schema version 6: the archive found by the duplicate rule itself.
--
-- Version 5 indexed an archived fact's text as PostgreSQL trims and lowers it,
-- read through jsonb. Neither is the rule a new fact is compared by: Python's
-- strip() and casefold() (deermem.model.duplicate_key), which no collation
-- reproduces ("Straße" is "STRASSE"; under LOCALE 'C' lower() leaves "ÉCOLE"
-- as it is), so a fact said again in another case was not found. And jsonb
-- refuses a text holding U+0000, which a fact may hold: archiving such a fact
-- failed, in every statement the index had to serve.
--
-- Each archive row now carries content_digest, the digest of its fact's
-- duplicate key (deermem.model.duplicate_digest: sixteen hex digits, never
-- the text), computed by deermem, and the index is on that. A match is
-- confirmed against the entry's text in Python. `deermem db upgrade` computes
-- the digest of the rows already there when it applies this version (in
-- Python, in the same transaction: database.fill_archive_digests). A row a
-- replica of an earlier deermem writes until it restarts has none (NULL): the
-- check reads such rows too.

DROP INDEX IF EXISTS deermem_archive_by_text;

ALTER TABLE deermem_archive ADD COLUMN content_digest text;

CREATE INDEX deermem_archive_by_digest ON deermem_archive (user_id, agent, content_digest);
