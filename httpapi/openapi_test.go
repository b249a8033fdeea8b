package httpapi

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	doc, err := OpenAPI()
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	require.NotNil(t, doc.Paths.Find("/v1/jobs"))
}

// TestEveryOperationIsNamed: generated clients take their method names
// from operationIds, so every operation has one, unique and camelCase, a
// summary, and at least one 4xx answer (make lint checks the same with
// Redocly CLI; this runs without Node).
func TestEveryOperationIsNamed(t *testing.T) {
	t.Parallel()
	doc, err := OpenAPI()
	require.NoError(t, err)
	camel := regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	seen := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			require.Regexp(t, camel, op.OperationID, "%s: an operationId", where)
			require.Empty(t, seen[op.OperationID], "%s and %s share the operationId %s", where, seen[op.OperationID], op.OperationID)
			seen[op.OperationID] = where
			require.NotEmpty(t, op.Summary, "%s: a summary", where)
			has4xx := false
			for code := range op.Responses.Map() {
				has4xx = has4xx || strings.HasPrefix(code, "4")
			}
			require.True(t, has4xx, "%s: a 4xx answer", where)
		}
	}
	require.Greater(t, len(seen), 40)
}
