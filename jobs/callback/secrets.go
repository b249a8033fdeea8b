package callback

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qEnsureCallbackSecret = queries.Must("EnsureCallbackSecret")
	qRotateCallbackSecret = queries.Must("RotateCallbackSecret")
)

// errConfigured: the secret is configured for every namespace, so it is
// rotated there, not through the API.
var errConfigured = domain.NewError(domain.ErrConflict, "conflict")

// CallbackSecrets returns the secrets that sign a namespace's callbacks:
// the current one first and, during a rotation's overlap, the previous one.
// The namespace's secret is created on first use, unless one is configured
// for every namespace (Config.Secret).
func (c *Sender) CallbackSecrets(ctx context.Context, namespace string) ([]string, error) {
	if c.cfg.Secret != "" {
		return []string{c.cfg.Secret}, nil
	}
	now := c.cfg.Now()
	c.secretsMu.Lock()
	cached, ok := c.secrets[namespace]
	c.secretsMu.Unlock()
	if ok && now.Before(cached.until) {
		return cached.secrets, nil
	}
	out, err := c.loadCallbackSecrets(ctx, namespace)
	if err != nil {
		return nil, err
	}
	c.secretsMu.Lock()
	c.secrets[namespace] = cachedSecrets{secrets: out, until: now.Add(secretsFor)}
	c.secretsMu.Unlock()
	return out, nil
}

// secretsFor is how long a process signs with the callback secrets it
// read: a rotation by another process reaches its callbacks within it
// (the rotated-out secret keeps signing for SecretOverlap anyway).
const secretsFor = time.Second

type cachedSecrets struct {
	secrets []string
	until   time.Time
}

// loadCallbackSecrets reads (creating it on first use) namespace's
// callback secret, and the previous one during a rotation's overlap.
func (c *Sender) loadCallbackSecrets(ctx context.Context, namespace string) ([]string, error) {
	var secret string
	var prev *string
	var prevUntil *time.Time
	err := c.pool.QueryRow(ctx, qEnsureCallbackSecret, "callbacks:"+namespace, newSecret()).Scan(&secret, &prev, &prevUntil)
	if err != nil {
		return nil, fmt.Errorf("callback secret of %s: %w", namespace, err)
	}
	out := []string{secret}
	if prev != nil && prevUntil != nil && c.cfg.Now().Before(*prevUntil) {
		out = append(out, *prev)
	}
	return out, nil
}

func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// SecretOverlap is how long a rotated-out callback secret still signs.
const SecretOverlap = 24 * time.Hour

// RotateCallbackSecret gives a namespace a new callback secret; callbacks
// carry signatures with both until the overlap ends. It returns the new
// secret and the end of the overlap.
func (c *Sender) RotateCallbackSecret(ctx context.Context, namespace string, md domain.Metadata) (string, time.Time, error) {
	if c.cfg.Secret != "" {
		return "", time.Time{}, fmt.Errorf("the callback secret is configured (AGENTREACH_CALLBACK_SECRET); rotate it there: %w", errConfigured)
	}
	if _, err := c.CallbackSecrets(ctx, namespace); err != nil { // make sure there is one to rotate
		return "", time.Time{}, err
	}
	fresh := newSecret()
	until := c.cfg.Now().UTC().Add(SecretOverlap)
	err := c.events.RetryTx(ctx, func(tx pgx.Tx) error { // its append comes after its write
		if _, err := tx.Exec(ctx, qRotateCallbackSecret, "callbacks:"+namespace, until, fresh); err != nil {
			return err
		}
		_, err := c.events.AppendTx(ctx, tx, "secrets:"+namespace, eventstore.Any, domain.NewEvent(domain.EventSecretRotated,
			domain.SecretRotated{Namespace: namespace, Secret: "callbacks", PreviousValidUntil: until}, md))
		return err
	})
	c.secretsMu.Lock()
	delete(c.secrets, namespace) // this process signs with the new one at once
	c.secretsMu.Unlock()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("rotate callback secret of %s: %w", namespace, err)
	}
	return fresh, until, nil
}
