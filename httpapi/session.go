package httpapi

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/auth"
)

// The dashboard's sign-in: the key form posts the key once (POST
// /v1/session, the key as its bearer credential, checked and rate-limited
// as every key is), and the answer sets it as an HttpOnly, SameSite=Strict
// cookie on the whole origin, so the dashboard's own calls and River UI's
// reach the same handlers with the same scopes. Nothing is kept on the
// server: each request authenticates the key anew, so a revoked or expired
// key stops at once. Script on the page never sees the key again.
//
// A cookie travels with requests other sites make the browser send, so it
// counts only where the browser says the request comes from this origin:
// for anything but GET and HEAD, Sec-Fetch-Site must be same-origin (or
// none: typed by the user), or, from a browser too old to send it, Origin
// must name this host. Else the request is as one without a key.

// SessionCookie is the name of the dashboard's sign-in cookie, followed
// by "_" and the port the browser reached the service on (cookieName).
const SessionCookie = "agentreach_session"

// cookieName is the sign-in cookie's name for r: a browser keeps cookies
// per host, not per port, so two local servers (make run and make demo on
// 127.0.0.1) would overwrite each other's sign-in under one name.
func cookieName(r *http.Request) string {
	if _, port, err := net.SplitHostPort(r.Host); err == nil && port != "" {
		return SessionCookie + "_" + port
	}
	return SessionCookie
}

// sessionFor bounds how long a browser keeps a key (a key that expires
// sooner ends the cookie with it).
const sessionFor = 12 * time.Hour

type sessionResponse struct {
	KeyID     string     `json:"key_id"`
	Namespace string     `json:"namespace"`
	Scopes    []string   `json:"scopes"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Authentication is "off" when the service runs with --insecure.
	Authentication string `json:"authentication"`
	// RiverUI says whether this key opens River UI (an admin of every
	// namespace).
	RiverUI bool `json:"river_ui"`
}

func sessionOf(p *auth.Principal, insecure bool) sessionResponse {
	out := sessionResponse{KeyID: p.KeyID, Namespace: p.Namespace, Scopes: p.Scopes, ExpiresAt: p.ExpiresAt(),
		Authentication: "on", RiverUI: p.Has(auth.ScopeAdmin) && p.Namespace == auth.AllNamespaces}
	if insecure && p.KeyID == insecurePrincipal.KeyID {
		out.Authentication = "off"
	}
	return out
}

// getSession answers who the request's key is: GET /v1/session.
func (s *Server) getSession(c *gin.Context) {
	c.JSON(http.StatusOK, sessionOf(principal(c), s.deps.Insecure))
}

// createSession sets the request's key as the sign-in cookie: POST
// /v1/session with Authorization: Bearer <key>.
func (s *Server) createSession(c *gin.Context) {
	p := principal(c)
	key, fromCookie := credential(c)
	if key == "" || fromCookie {
		// Authentication is off and no key was sent, or the cookie was
		// the credential: there is nothing new to keep.
		c.JSON(http.StatusOK, sessionOf(p, s.deps.Insecure))
		return
	}
	age := sessionFor
	if exp := p.ExpiresAt(); exp != nil {
		age = min(age, time.Until(*exp))
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: cookieName(c.Request), Value: key, Path: "/", MaxAge: int(age.Seconds()),
		HttpOnly: true, Secure: c.Request.TLS != nil, SameSite: http.SameSiteStrictMode})
	c.JSON(http.StatusOK, sessionOf(p, s.deps.Insecure))
}

// deleteSession signs the browser out: DELETE /v1/session. It needs no
// key: forgetting one is always allowed.
func (s *Server) deleteSession(c *gin.Context) {
	http.SetCookie(c.Writer, &http.Cookie{Name: cookieName(c.Request), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: c.Request.TLS != nil, SameSite: http.SameSiteStrictMode})
	c.Status(http.StatusNoContent)
}

// credential is the request's key or token: the Authorization header
// (Bearer, or the password of Basic auth, as curl -u sends it), else the
// sign-in cookie when the request comes from this origin. fromCookie
// says which.
func credential(c *gin.Context) (key string, fromCookie bool) {
	h := c.GetHeader("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(t), false
	}
	if _, pass, ok := c.Request.BasicAuth(); ok {
		return pass, false
	}
	if h != "" {
		return "", false
	}
	ck, err := c.Request.Cookie(cookieName(c.Request))
	if err != nil || ck.Value == "" || !sameOrigin(c.Request) {
		return "", false
	}
	return ck.Value, true
}

// sameOrigin reports whether a request may act with the origin's cookie:
// always for GET and HEAD (they change nothing), else only when the
// browser says the request comes from this origin.
func sameOrigin(r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
		origin := r.Header.Get("Origin")
		if origin == "" {
			return false
		}
		u, err := url.Parse(origin)
		return err == nil && u.Host == r.Host
	}
	return false
}

// browserSignIn sends a browser that opens River UI without a key to the
// dashboard's sign-in, which comes back here once the key is set; every
// other request goes on to the chain that checks the key.
func (s *Server) browserSignIn(c *gin.Context) {
	if key, _ := credential(c); key == "" && !s.deps.Insecure && c.Request.Method == http.MethodGet &&
		strings.Contains(c.GetHeader("Accept"), "text/html") {
		c.Redirect(http.StatusFound, "/dashboard/?next="+url.QueryEscape(c.Request.URL.Path))
		c.Abort()
		return
	}
	c.Next()
}
