package httpapi

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// The dashboard is static files embedded in the binary: plain HTML, CSS
// and JavaScript, no framework and nothing fetched from the internet. The
// page holds no data; it reads the API with the sign-in cookie (session.go),
// so it is behind the same auth.
//
// Every view has an address of its own under /dashboard/ (a job, an agent,
// a filtered list): any path that names no file answers index.html, and
// the page draws the view the path names, so such an address can be
// bookmarked, shared and reloaded.
//
//go:embed dashboard
var dashboardFiles embed.FS

func dashboardHandler() gin.HandlerFunc {
	sub, err := fs.Sub(dashboardFiles, "dashboard")
	if err != nil {
		panic(err)
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix("/dashboard", http.FileServer(http.FS(sub)))
	return func(c *gin.Context) {
		c.Header("Cache-Control", "no-cache")
		c.Header("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'")
		c.Header("X-Content-Type-Options", "nosniff")
		name := strings.TrimPrefix(c.Param("file"), "/")
		if name == "" || name == "index.html" || !isFile(sub, name) {
			http.ServeContent(c.Writer, c.Request, "index.html", time.Time{}, bytes.NewReader(index))
			return
		}
		files.ServeHTTP(c.Writer, c.Request)
	}
}

// isFile reports whether name is one of the dashboard's files (not a
// folder, not a view's address).
func isFile(fsys fs.FS, name string) bool {
	st, err := fs.Stat(fsys, name)
	return err == nil && !st.IsDir()
}
