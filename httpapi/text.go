package httpapi

import (
	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/domain"
)

// storableText and unstorableJSON are domain's checks of what PostgreSQL
// can store (see domain/text.go), applied at the API's edge.
var (
	storableText   = domain.StorableText
	unstorableJSON = domain.UnstorableJSON
)

// cleanPathAndQuery refuses a request whose path parameters or query
// values PostgreSQL could not store (NUL, bytes that are not UTF-8), before
// any handler sees them: 400 invalid_argument naming the parameter.
func cleanPathAndQuery(c *gin.Context) {
	for _, p := range c.Params {
		if !storableText(p.Value) {
			_ = c.Error(Invalid(p.Key, "%s must be UTF-8 text without NUL characters", p.Key))
			c.Abort()
			return
		}
	}
	if c.Request.URL.RawQuery != "" {
		for k, vs := range c.Request.URL.Query() {
			if !storableText(k) {
				_ = c.Error(Invalid("query", "query parameter names must be UTF-8 text without NUL characters"))
				c.Abort()
				return
			}
			for _, v := range vs {
				if !storableText(v) {
					_ = c.Error(Invalid(k, "%s must be UTF-8 text without NUL characters", k))
					c.Abort()
					return
				}
			}
		}
	}
	c.Next()
}
