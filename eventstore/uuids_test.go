package eventstore_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/eventstore"
)

func TestUUIDs(t *testing.T) {
	t.Parallel()
	a, b := uuid.New(), uuid.New()
	cases := []struct {
		name string
		ids  []string
		want any
	}{
		{"none", []string{}, pgtype.FlatArray[pgtype.UUID]{}},
		{"all parse", []string{a.String(), b.String()}, pgtype.FlatArray[pgtype.UUID]{{Bytes: a, Valid: true}, {Bytes: b, Valid: true}}},
		{"one does not: passed as it is", []string{a.String(), "not-a-uuid"}, []string{a.String(), "not-a-uuid"}},
	}
	m := pgtype.NewMap()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := eventstore.UUIDs(c.ids)
			require.Equal(t, c.want, got)
			if _, ok := got.(pgtype.FlatArray[pgtype.UUID]); ok {
				_, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, got, nil)
				require.NoError(t, err, "encoded in binary, with no failed first try")
			}
		})
	}
	_, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, []string{a.String()}, nil)
	require.Error(t, err, "why UUIDs exists: pgx cannot send strings as a binary uuid[]")
}
