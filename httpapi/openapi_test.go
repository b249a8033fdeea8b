package httpapi

import (
	"context"
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
