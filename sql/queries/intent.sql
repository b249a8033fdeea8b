-- Statements of intent resolution (package intent) and of the catalogue's
-- docs the registry writes with an agent's row (registry/catalogue.go).

-- name: CatalogueVersion
-- The version of a namespace's catalogue (0: nothing ever registered or described).
SELECT coalesce((SELECT version FROM catalogue_versions WHERE namespace = $1), 0);

-- name: CatalogueAgents
-- The agents whose capabilities make a namespace's catalogue.
SELECT agent_id, capabilities, aliases, registered_at FROM agents WHERE namespace = $1 AND NOT deregistered;

-- name: CatalogueDocs
-- What those agents said of their capabilities.
SELECT d.agent_id, d.capability, d.doc
FROM capability_docs d JOIN agents a ON a.namespace = d.namespace AND a.agent_id = d.agent_id
WHERE d.namespace = $1 AND NOT a.deregistered;

-- name: CatalogueNotes
-- The operators' descriptions of a namespace's capabilities.
SELECT capability, doc, updated_by, updated_at FROM capability_notes WHERE namespace = $1;

-- name: CapabilityNoteForUpdate
-- One operator's description, locked for its replacement.
SELECT doc FROM capability_notes WHERE namespace = $1 AND capability = $2 FOR UPDATE;

-- name: UpsertCapabilityNote
-- Sets an operator's description of a capability.
INSERT INTO capability_notes (namespace, capability, doc, updated_by, updated_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (namespace, capability) DO UPDATE SET doc = excluded.doc, updated_by = excluded.updated_by,
    updated_at = excluded.updated_at;

-- name: DeleteCapabilityNote
-- Removes an operator's description (a PUT that says nothing).
DELETE FROM capability_notes WHERE namespace = $1 AND capability = $2;

-- name: AgentCapabilityDocs
-- What one agent said of its capabilities, as registered.
SELECT capability, doc FROM capability_docs WHERE namespace = $1 AND agent_id = $2;

-- name: UpsertCapabilityDoc
-- Keeps what an agent says of one capability; an unchanged doc is not rewritten (nor the catalogue's version bumped).
INSERT INTO capability_docs (namespace, agent_id, capability, doc) VALUES ($1, $2, $3, $4)
ON CONFLICT (namespace, agent_id, capability) DO UPDATE SET doc = excluded.doc
    WHERE capability_docs.doc IS DISTINCT FROM excluded.doc;

-- name: DeleteOtherCapabilityDocs
-- Drops an agent's docs of capabilities it no longer describes.
DELETE FROM capability_docs WHERE namespace = $1 AND agent_id = $2 AND NOT (capability = ANY($3::text[]));

-- name: CapabilityVectors
-- The stored vectors of a namespace's entries for one embedding model.
SELECT capability, text_hash, vector FROM capability_vectors WHERE namespace = $1 AND model = $2;

-- name: UpsertCapabilityVector
-- Keeps the vector of one entry's text.
INSERT INTO capability_vectors (namespace, model, capability, text_hash, vector, computed_at) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (namespace, model, capability) DO UPDATE SET text_hash = excluded.text_hash, vector = excluded.vector,
    computed_at = excluded.computed_at;

-- name: DeleteStaleVectors
-- Drops the vectors of capabilities no longer in the catalogue.
DELETE FROM capability_vectors WHERE namespace = $1 AND model = $2 AND NOT (capability = ANY($3::text[]));

-- name: IntentAnswer
-- A cached model answer.
SELECT answer FROM intent_answers
WHERE namespace = $1 AND resolver = $2 AND model = $3 AND catalogue_version = $4 AND intent_hash = $5;

-- name: InsertIntentAnswer
-- Caches a model answer; a concurrent identical one stays as it was.
INSERT INTO intent_answers (namespace, resolver, model, catalogue_version, intent_hash, intent, answer)
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING;

-- name: PruneIntentAnswers
-- Drops the cached answers of a namespace's older catalogue versions.
DELETE FROM intent_answers WHERE namespace = $1 AND catalogue_version < $2;
