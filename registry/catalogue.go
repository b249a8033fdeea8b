package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

// What agents say of their capabilities (capability_info, a card's skills)
// is kept beside their rows for the capability catalogue (package intent).

var (
	qAgentCapabilityDocs      = queries.Must("AgentCapabilityDocs")
	qUpsertCapabilityDoc      = queries.Must("UpsertCapabilityDoc")
	qDeleteOtherCapabilityDoc = queries.Must("DeleteOtherCapabilityDocs")
)

// writeDocsTx keeps what agent k says of its capabilities, in the
// transaction that writes its row: docs replaces what it said before. An
// unchanged doc is not rewritten, so a restart that says the same leaves
// the catalogue's version alone.
func writeDocsTx(ctx context.Context, tx pgx.Tx, k domain.AgentKey, docs map[string]domain.CapabilityDoc) error {
	keep := make([]string, 0, len(docs))
	for c := range docs {
		keep = append(keep, c)
	}
	slices.Sort(keep) // a stable order of row locks
	for _, c := range keep {
		b, err := json.Marshal(docs[c])
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, qUpsertCapabilityDoc, k.Namespace, k.ID, c, b); err != nil {
			return fmt.Errorf("capability docs of agent %s: %w", k, err)
		}
	}
	if _, err := tx.Exec(ctx, qDeleteOtherCapabilityDoc, k.Namespace, k.ID, keep); err != nil {
		return fmt.Errorf("capability docs of agent %s: %w", k, err)
	}
	return nil
}

// CapabilityDocs returns what agent k said of its capabilities when it
// last registered (or its card last changed), by capability.
func (r *Registry) CapabilityDocs(ctx context.Context, k domain.AgentKey) (map[string]domain.CapabilityDoc, error) {
	return capabilityDocs(ctx, r.pool, k)
}

func capabilityDocs(ctx context.Context, q eventstore.Querier, k domain.AgentKey) (map[string]domain.CapabilityDoc, error) {
	rows, err := q.Query(ctx, qAgentCapabilityDocs, k.Namespace, k.ID)
	if err != nil {
		return nil, fmt.Errorf("capability docs of agent %s: %w", k, err)
	}
	out := map[string]domain.CapabilityDoc{}
	for rows.Next() {
		var c string
		var d domain.CapabilityDoc
		if err := rows.Scan(&c, &d); err != nil {
			rows.Close()
			return nil, fmt.Errorf("capability docs of agent %s: %w", k, err)
		}
		out[c] = d
	}
	return out, rows.Err()
}
