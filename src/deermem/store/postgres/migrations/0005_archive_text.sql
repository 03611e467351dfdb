-- deermem schema version 5: the archive found by what its facts say.
--
-- This version created an index on each archived fact's text, trimmed and in
-- lower case, read through jsonb: lower(btrim((document::jsonb) -> 'fact' ->>
-- 'content')). Version 6 drops it and indexes a digest deermem computes
-- instead (see 0006_archive_digest.sql): the expression was not the duplicate
-- rule, and jsonb refuses a text holding U+0000, which an archived fact may
-- hold — so building the index stopped the upgrade of a database whose
-- archive held one. A database upgraded from here applies version 6 in the
-- same transaction, so the index is no longer built; a database at version 5
-- keeps it until version 6 drops it.

SELECT 1;
