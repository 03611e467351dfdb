-- deermem schema version 1: one memory per (user, agent), as the Markdown store keeps it.
--
-- Every table carries the tenant: user_id (the raw user id; '' is the
-- single-user layout, as Scope.of refuses an empty id) and agent (the
-- normalised agent bucket). Documents are JSON text written by deermem —
-- text, not jsonb, so a fact's keys keep their order and every value reads
-- back exactly as written.

CREATE TABLE deermem_users (
    user_id    text   PRIMARY KEY,
    revision   bigint NOT NULL,          -- one more per commit of the user (any agent)
    commit_id  uuid   NOT NULL,          -- new with every commit: the scope version token
    summaries  text   NOT NULL           -- the summary document, as memory.json holds it
);

CREATE TABLE deermem_facts (
    user_id   text   NOT NULL REFERENCES deermem_users (user_id),
    agent     text   NOT NULL,
    fact_id   text   NOT NULL,
    revision  bigint NOT NULL,
    document  text   NOT NULL,           -- the fact, every field
    PRIMARY KEY (user_id, agent, fact_id)
);

CREATE SEQUENCE deermem_archive_arrival;

CREATE TABLE deermem_archive (
    user_id      text   NOT NULL REFERENCES deermem_users (user_id),
    agent        text   NOT NULL,
    fact_id      text   NOT NULL,
    archived_at  text   NOT NULL,        -- the entry's stored time: the bounds' age
    arrival      bigint NOT NULL DEFAULT nextval('deermem_archive_arrival'),
    document     text   NOT NULL,        -- the entry: the fact, its receipt line, its usage
    PRIMARY KEY (user_id, agent, fact_id)
);
-- The bounds read a scope's archive in arrival order.
CREATE INDEX deermem_archive_by_arrival ON deermem_archive (user_id, agent, arrival);

CREATE TABLE deermem_receipts (
    user_id   text   NOT NULL REFERENCES deermem_users (user_id),
    agent     text   NOT NULL,
    position  bigint GENERATED ALWAYS AS IDENTITY,  -- the audit's order, oldest first
    document  text   NOT NULL,           -- the audit event: ids, categories, numbers only
    PRIMARY KEY (user_id, agent, position)
);

CREATE TABLE deermem_usage (
    user_id           text             NOT NULL REFERENCES deermem_users (user_id),
    agent             text             NOT NULL,
    fact_id           text             NOT NULL,
    access_heat       double precision NOT NULL,
    access_count      bigint           NOT NULL,
    last_accessed_at  text             NOT NULL,
    PRIMARY KEY (user_id, agent, fact_id)
);

CREATE TABLE deermem_threads (
    user_id     text NOT NULL REFERENCES deermem_users (user_id),
    agent       text NOT NULL,
    thread_key  text NOT NULL,           -- sha256 of the thread id (any text), as the file name
    document    text NOT NULL,           -- {threadId, mark, markedAt}: no conversation text
    PRIMARY KEY (user_id, agent, thread_key)
);
