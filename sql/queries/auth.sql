-- Statements of package auth: API keys. Only a key's hash is stored.

-- name: APIKeyByHash
-- The key whose hash is $1, to authenticate a request.
SELECT key_id, namespace, scopes, expires_at, revoked_at FROM api_keys WHERE key_hash = $1;

-- name: InsertAPIKey
-- A new key, as its KEY_CREATED event describes it, with its hash.
INSERT INTO api_keys (key_id, namespace, name, key_hash, scopes, created_at, created_by, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- name: LockAPIKey
-- A key's namespace and revocation, locked to revoke it.
SELECT namespace, revoked_at FROM api_keys WHERE key_id = $1 FOR UPDATE;

-- name: RevokeAPIKey
-- Ends a key at $2.
UPDATE api_keys SET revoked_at = $2 WHERE key_id = $1;

-- name: ListAPIKeys
-- The keys of namespace $1 ('*': of every namespace), oldest first, without their hashes.
SELECT key_id, namespace, name, scopes, created_at, created_by, expires_at, revoked_at
FROM api_keys WHERE $1 = '*' OR namespace = $1 ORDER BY created_at, key_id;
