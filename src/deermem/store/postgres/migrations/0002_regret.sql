-- deermem schema version 2: regret (docs/regret.md), kept as the Markdown store
-- keeps it in regret-events.json and shadow-evictions.json beside the audit.
--
-- Like every table, both carry the tenant (user_id, agent). Documents are the
-- JSON text the Markdown store's sidecars hold for one event or one mark: ids,
-- kinds, times, policy versions, a digest of a query — never fact content.
-- The primary keys are the indexes the store reads them by: a scope's events
-- in order (and the trim to the newest regret_max_events), a scope's marks by
-- fact id.

CREATE TABLE deermem_regret_events (
    user_id   text   NOT NULL REFERENCES deermem_users (user_id),
    agent     text   NOT NULL,
    position  bigint GENERATED ALWAYS AS IDENTITY,  -- the events' order, oldest first
    document  text   NOT NULL,           -- one regret event
    PRIMARY KEY (user_id, agent, position)
);

CREATE TABLE deermem_shadow_marks (
    user_id   text NOT NULL REFERENCES deermem_users (user_id),
    agent     text NOT NULL,
    fact_id   text NOT NULL,             -- a fact of the library the shadow policy would evict
    document  text NOT NULL,             -- the mark: policy, since, receipt id, category
    PRIMARY KEY (user_id, agent, fact_id)
);
