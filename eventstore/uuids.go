package eventstore

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// UUIDs is ids as a uuid[] parameter pgx encodes in binary at once. pgx
// cannot encode a string as a binary uuid: for a []string it fails that
// first, formats the whole array into an error it then drops, and sends
// the array as text. (A []uuid.UUID is slower still: pgx takes it for a
// driver.Valuer, an element at a time.) Ids that do not all parse are
// passed as they are, for PostgreSQL to refuse as it would have.
func UUIDs(ids []string) any {
	out := make(pgtype.FlatArray[pgtype.UUID], len(ids))
	for i, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil {
			return ids
		}
		out[i] = pgtype.UUID{Bytes: u, Valid: true}
	}
	return out
}
