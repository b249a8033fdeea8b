-- Intent resolution (POST /v1/resolve, a job submitted with an intent): the
-- capability catalogue of each namespace, its version, the vectors of its
-- entries and the cache of every model answer.

-- What agents say of each of their capabilities: a registration's
-- capability_info, an A2A card's skills (name, description, examples, tags).
-- Written with the agent's row, in the same transaction; the catalogue reads
-- only those of agents that are not deregistered.
CREATE TABLE capability_docs (
    namespace  text  NOT NULL,
    agent_id   text  NOT NULL,
    capability text  NOT NULL,
    doc        jsonb NOT NULL, -- domain.CapabilityDoc
    PRIMARY KEY (namespace, agent_id, capability)
);

-- Operators' descriptions (PUT /v1/capabilities/{name}). Each change is a
-- CAPABILITY_UPDATED on catalogue:<namespace> in the same transaction. A
-- capability an operator described is in the catalogue even with no agent.
CREATE TABLE capability_notes (
    namespace  text        NOT NULL,
    capability text        NOT NULL,
    doc        jsonb       NOT NULL,
    updated_by text        NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (namespace, capability)
);

-- The version of each namespace's catalogue. Every change of what the
-- catalogue is built from bumps it, in the transaction that makes the
-- change, whichever code path makes it (registration, card refresh, an
-- operator's PATCH of aliases, deregistration, PUT): the triggers below.
-- Cached model answers name the version they were given for, so a changed
-- catalogue is never answered from an older one. A restart that
-- re-registers the same capabilities changes nothing and bumps nothing.
CREATE TABLE catalogue_versions (
    namespace text   PRIMARY KEY,
    version   bigint NOT NULL
);

CREATE FUNCTION catalogue_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO catalogue_versions AS v (namespace, version)
    VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.namespace ELSE NEW.namespace END, 1)
    ON CONFLICT (namespace) DO UPDATE SET version = v.version + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER agents_catalogue_insert_delete AFTER INSERT OR DELETE ON agents
    FOR EACH ROW EXECUTE FUNCTION catalogue_bump();
CREATE TRIGGER agents_catalogue_update AFTER UPDATE OF capabilities, aliases, deregistered ON agents
    FOR EACH ROW WHEN (OLD.capabilities IS DISTINCT FROM NEW.capabilities OR OLD.aliases IS DISTINCT FROM NEW.aliases
        OR OLD.deregistered IS DISTINCT FROM NEW.deregistered)
    EXECUTE FUNCTION catalogue_bump();
CREATE TRIGGER capability_docs_catalogue_insert_delete AFTER INSERT OR DELETE ON capability_docs
    FOR EACH ROW EXECUTE FUNCTION catalogue_bump();
CREATE TRIGGER capability_docs_catalogue_update AFTER UPDATE ON capability_docs
    FOR EACH ROW WHEN (OLD.doc IS DISTINCT FROM NEW.doc) EXECUTE FUNCTION catalogue_bump();
CREATE TRIGGER capability_notes_catalogue_insert_delete AFTER INSERT OR DELETE ON capability_notes
    FOR EACH ROW EXECUTE FUNCTION catalogue_bump();
CREATE TRIGGER capability_notes_catalogue_update AFTER UPDATE ON capability_notes
    FOR EACH ROW WHEN (OLD.doc IS DISTINCT FROM NEW.doc) EXECUTE FUNCTION catalogue_bump();

-- Embedding vectors of catalogue entries, per model (no pgvector: float
-- arrays, compared in the process). text_hash fingerprints the text that was
-- embedded: an entry whose text changed is embedded again, the others are
-- not.
CREATE TABLE capability_vectors (
    namespace   text        NOT NULL,
    model       text        NOT NULL,
    capability  text        NOT NULL,
    text_hash   bytea       NOT NULL,
    vector      real[]      NOT NULL,
    computed_at timestamptz NOT NULL,
    PRIMARY KEY (namespace, model, capability)
);

-- Every model answer (an embedding ranking, a chat model's choice), by
-- namespace, resolver, model, catalogue version and normalised intent
-- (domain.NormalizeIntent; its SHA-256 in the key, since an intent may be
-- longer than an index entry): a repeated intent never calls a model twice.
-- Answers of older catalogue versions are pruned when a newer one is loaded.
CREATE TABLE intent_answers (
    namespace         text        NOT NULL,
    resolver          text        NOT NULL,
    model             text        NOT NULL,
    catalogue_version bigint      NOT NULL,
    intent_hash       bytea       NOT NULL,
    intent            text        NOT NULL,
    answer            jsonb       NOT NULL, -- domain.IntentRanking
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, resolver, model, catalogue_version, intent_hash)
);
