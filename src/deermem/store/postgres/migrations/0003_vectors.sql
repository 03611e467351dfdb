-- deermem schema version 3: search vectors (docs/search.md), derived data kept
-- beside the facts so a new process does not embed a whole scope again.
--
-- A vector belongs to a scope and to the embedding model that made it (its
-- name and weights' digest); it is found by a digest of exactly the text
-- embedded (content_key), so a fact archived or restored with the same words
-- keeps it. The cosine is computed in Python over the scope: no pgvector.
-- Never fact content: the text is not stored here, only its vector.

CREATE TABLE deermem_vectors (
    user_id     text  NOT NULL REFERENCES deermem_users (user_id),
    agent       text  NOT NULL,
    model       text  NOT NULL,          -- the embedding model's tag
    content_key text  NOT NULL,          -- blake2b-128 of the text embedded, hex
    vector      bytea NOT NULL,          -- little-endian float32
    PRIMARY KEY (user_id, agent, model, content_key)
);
