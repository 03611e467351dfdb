-- deermem schema version 5: the archive found by what its facts say.
--
-- A new fact is compared with the archive before it is added (a fact said
-- again after it was forgotten is relearned, not duplicated): the store asks
-- for the entries whose text, trimmed and in lower case, is the new fact's.
-- Without an index on that text the database parsed every entry of the
-- scope's archive at each new fact. The expression is exactly the one the
-- store's query compares (PostgresStore._archived_matches). A hash index:
-- a fact's text has no length a B-tree entry could hold in every case.

CREATE INDEX deermem_archive_by_text ON deermem_archive
    USING hash (lower(btrim((document::jsonb) -> 'fact' ->> 'content')));
