package intent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qCatalogueVersion     = queries.Must("CatalogueVersion")
	qCatalogueAgents      = queries.Must("CatalogueAgents")
	qCatalogueDocs        = queries.Must("CatalogueDocs")
	qCatalogueNotes       = queries.Must("CatalogueNotes")
	qCapabilityNoteForUpd = queries.Must("CapabilityNoteForUpdate")
	qUpsertCapabilityNote = queries.Must("UpsertCapabilityNote")
	qDeleteCapabilityNote = queries.Must("DeleteCapabilityNote")
	qPruneIntentAnswers   = queries.Must("PruneIntentAnswers")
)

// Catalogue is a namespace's catalogue at one version, indexed for the
// lexical resolver. It is shared and must not be changed.
type Catalogue struct {
	domain.Catalogue
	Lexical *domain.LexicalIndex
	// Names are the entries' names, in the entries' order.
	Names []string
	// Fingerprint is domain.Catalogue.Fingerprint: a version that says
	// nothing new keeps its entries' vectors.
	Fingerprint []byte
}

// Catalogue returns namespace ns's catalogue as it is now: the one this
// process holds if the database's version is still its version, else a
// fresh one, read in one snapshot.
func (s *Service) Catalogue(ctx context.Context, ns string) (*Catalogue, error) {
	var v int64
	if err := s.pool.QueryRow(ctx, qCatalogueVersion, ns).Scan(&v); err != nil {
		return nil, fmt.Errorf("catalogue version of %s: %w", ns, err)
	}
	s.mu.Lock()
	held := s.catalogues[ns]
	s.mu.Unlock()
	if held != nil && held.Version == v {
		return held, nil
	}
	got, err, _ := s.loads.Do(ns, func() (any, error) {
		// Shared by every caller that needs it now: not bound to the first one's request.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return s.loadCatalogue(lctx, ns)
	})
	if err != nil {
		return nil, err
	}
	return got.(*Catalogue), nil
}

// loadCatalogue reads a namespace's catalogue in one repeatable-read
// snapshot, so its version is the version of what it holds.
func (s *Service) loadCatalogue(ctx context.Context, ns string) (*Catalogue, error) {
	var version int64
	var agents []domain.CatalogueAgent
	var notes []domain.CapabilityNote
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, qCatalogueVersion, ns).Scan(&version); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, qCatalogueAgents, ns)
		if err != nil {
			return err
		}
		byID := map[string]int{}
		if agents, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.CatalogueAgent, error) {
			var a domain.CatalogueAgent
			return a, r.Scan(&a.ID, &a.Capabilities, &a.Aliases, &a.RegisteredAt)
		}); err != nil {
			return err
		}
		for i := range agents {
			byID[agents[i].ID] = i
		}
		rows, err = tx.Query(ctx, qCatalogueDocs, ns)
		if err != nil {
			return err
		}
		type docRow struct {
			agent, capability string
			doc               domain.CapabilityDoc
		}
		docs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (docRow, error) {
			var d docRow
			return d, r.Scan(&d.agent, &d.capability, &d.doc)
		})
		if err != nil {
			return err
		}
		for _, d := range docs {
			if i, ok := byID[d.agent]; ok {
				if agents[i].Docs == nil {
					agents[i].Docs = map[string]domain.CapabilityDoc{}
				}
				agents[i].Docs[d.capability] = d.doc
			}
		}
		rows, err = tx.Query(ctx, qCatalogueNotes, ns)
		if err != nil {
			return err
		}
		notes, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.CapabilityNote, error) {
			var n domain.CapabilityNote
			return n, r.Scan(&n.Capability, &n.Doc, &n.UpdatedBy, &n.UpdatedAt)
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("load the catalogue of %s: %w", ns, err)
	}
	cat := &Catalogue{Catalogue: domain.BuildCatalogue(ns, version, agents, notes)}
	cat.Lexical = domain.NewLexicalIndex(cat.Entries)
	cat.Fingerprint = cat.Catalogue.Fingerprint()
	cat.Names = make([]string, len(cat.Entries))
	for i, e := range cat.Entries {
		cat.Names[i] = e.Name
	}
	s.mu.Lock()
	prev := s.catalogues[ns]
	if prev == nil || prev.Version < version {
		s.catalogues[ns] = cat
	}
	s.mu.Unlock()
	if prev != nil && prev.Version < version {
		// Answers given for older versions will not be asked for again.
		if _, err := s.pool.Exec(ctx, qPruneIntentAnswers, ns, version); err != nil {
			s.logger.WarnContext(ctx, "prune cached intent answers", "namespace", ns, "err", err)
		}
	}
	return cat, nil
}

// Entry returns the catalogue entry of capability name in namespace ns
// (domain.ErrNotFound if there is none) and the catalogue's version.
func (s *Service) Entry(ctx context.Context, ns, name string) (domain.CatalogueEntry, int64, error) {
	cat, err := s.Catalogue(ctx, ns)
	if err != nil {
		return domain.CatalogueEntry{}, 0, err
	}
	e, ok := cat.Entry(name)
	if !ok {
		return e, cat.Version, fmt.Errorf("capability %q in %s: %w", name, ns, domain.ErrNotFound)
	}
	return e, cat.Version, nil
}

// Describe sets an operator's description of capability name in
// namespace ns; an empty doc removes it. The change is a
// CAPABILITY_UPDATED on the catalogue's stream, in the same transaction;
// a doc equal to the one held changes nothing. It returns the entry and
// the catalogue's version after the change; a bad name or doc is a
// *domain.FieldError, removing the doc of a capability nobody offers
// leaves nothing to return (domain.ErrNotFound).
func (s *Service) Describe(ctx context.Context, ns, name string, doc domain.CapabilityDoc, md domain.Metadata) (domain.CatalogueEntry, int64, error) {
	if !domain.ValidCapability(name) {
		return domain.CatalogueEntry{}, 0, &domain.FieldError{Field: "name", Message: "must be a capability, e.g. parcel.track"}
	}
	if err := doc.Normalize(""); err != nil {
		return domain.CatalogueEntry{}, 0, err
	}
	err := s.store.RetryTx(ctx, func(tx pgx.Tx) error { // its append comes after its writes
		var from *domain.CapabilityDoc
		var held domain.CapabilityDoc
		err := tx.QueryRow(ctx, qCapabilityNoteForUpd, ns, name).Scan(&held)
		switch {
		case err == nil:
			from = &held
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		var to *domain.CapabilityDoc
		if !doc.Empty() {
			to = &doc
		}
		if sameDoc(from, to) {
			return nil
		}
		if to == nil {
			_, err = tx.Exec(ctx, qDeleteCapabilityNote, ns, name)
		} else {
			_, err = tx.Exec(ctx, qUpsertCapabilityNote, ns, name, doc, md.Actor, s.now().UTC())
		}
		if err != nil {
			return err
		}
		_, err = s.store.AppendTx(ctx, tx, domain.CatalogueStream(ns), eventstore.Any, domain.NewEvent(domain.EventCapabilityUpdated,
			domain.CapabilityUpdated{Namespace: ns, Capability: name, From: from, To: to}, md))
		return err
	})
	if err != nil {
		return domain.CatalogueEntry{}, 0, fmt.Errorf("describe capability %q in %s: %w", name, ns, err)
	}
	return s.Entry(ctx, ns, name)
}

func sameDoc(a, b *domain.CapabilityDoc) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Title == b.Title && a.Description == b.Description && slices.Equal(a.Examples, b.Examples) && slices.Equal(a.Tags, b.Tags)
}

// entryText is what the embedding resolver embeds of an entry: its name
// as words, title, description, examples and tags, a line each.
func entryText(e domain.CatalogueEntry) string {
	name := strings.NewReplacer(".", " ", ":", " ", "/", " ", "_", " ", "-", " ").Replace(e.Name)
	parts := []string{name}
	for _, p := range append([]string{e.Title, e.Description}, e.Examples...) {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(e.Tags) > 0 {
		parts = append(parts, strings.Join(e.Tags, ", "))
	}
	return strings.Join(parts, "\n")
}
