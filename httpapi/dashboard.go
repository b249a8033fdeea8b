package httpapi

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/gin-gonic/gin"
)

// The dashboard is static files embedded in the binary: plain HTML, CSS
// and JavaScript, no framework and nothing fetched from the internet. The
// page holds no data; it reads the API with the key the operator enters
// (kept in the browser's localStorage), so it is behind the same auth.
//
//go:embed dashboard
var dashboardFiles embed.FS

func dashboardHandler() gin.HandlerFunc {
	sub, err := fs.Sub(dashboardFiles, "dashboard")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix("/dashboard", http.FileServer(http.FS(sub)))
	return func(c *gin.Context) {
		c.Header("Cache-Control", "no-cache")
		c.Header("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:")
		files.ServeHTTP(c.Writer, c.Request)
	}
}
