package httpapi

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gin-gonic/gin"
)

// OpenAPIYAML is the OpenAPI 3 document of the whole HTTP API. A test
// validates every request and response of the test suite against it, so
// the document and the server cannot drift apart.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

var (
	openAPIOnce sync.Once
	openAPIJSON []byte
	openAPIErr  error
)

// OpenAPI parses the document.
func OpenAPI() (*openapi3.T, error) {
	return openapi3.NewLoader().LoadFromData(OpenAPIYAML)
}

func (s *Server) openAPI(c *gin.Context) {
	openAPIOnce.Do(func() {
		doc, err := OpenAPI()
		if err != nil {
			openAPIErr = err
			return
		}
		openAPIJSON, openAPIErr = json.Marshal(doc)
	})
	if openAPIErr != nil {
		_ = c.Error(openAPIErr)
		return
	}
	c.Data(http.StatusOK, "application/json", openAPIJSON)
}
