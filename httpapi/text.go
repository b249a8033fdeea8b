package httpapi

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
)

// PostgreSQL stores neither NUL (in text, nor \u0000 in jsonb) nor a UTF-16
// surrogate without its partner (jsonb refuses \ud800), nor bytes that are
// not UTF-8. Such text is refused at the edge, naming where it stands, so it
// never reaches a transaction (where it would fail with a 500, and in a
// group commit, fail the other members too).

// storableText reports whether s can be stored as PostgreSQL text.
func storableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// unstorableJSON returns the path (a.b[2].c; "" for the document itself)
// of the first string or key in the JSON document b that PostgreSQL cannot
// store, and whether there is one. b must be valid JSON.
func unstorableJSON(b []byte) (string, bool) {
	sc := textScanner{b: b}
	sc.value("")
	return sc.bad, sc.found
}

type textScanner struct {
	b     []byte
	i     int
	bad   string
	found bool
}

func (s *textScanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *textScanner) value(path string) {
	s.ws()
	if s.found || s.i >= len(s.b) {
		return
	}
	switch s.b[s.i] {
	case '{':
		s.i++
		for !s.found {
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] == '}' {
				s.i++
				return
			}
			if s.b[s.i] == ',' {
				s.i++
				continue
			}
			key, ok := s.str()
			at := key
			if path != "" {
				at = path + "." + key
			}
			if !ok {
				s.bad, s.found = at, true
				return
			}
			s.ws()
			s.i++ // ':'
			s.value(at)
		}
	case '[':
		s.i++
		for n := 0; !s.found; {
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] == ']' {
				s.i++
				return
			}
			if s.b[s.i] == ',' {
				s.i++
				n++
				continue
			}
			s.value(path + "[" + strconv.Itoa(n) + "]")
		}
	case '"':
		if _, ok := s.str(); !ok {
			s.bad, s.found = path, true
		}
	default: // number, true, false, null
		for s.i < len(s.b) && !strings.ContainsRune(",]} \t\r\n", rune(s.b[s.i])) {
			s.i++
		}
	}
}

// str reads a string literal at s.i and returns its raw text (escapes
// left as they are, for naming a key) and whether it is storable.
func (s *textScanner) str() (string, bool) {
	s.i++ // opening quote
	start, ok := s.i, true
	for s.i < len(s.b) && s.b[s.i] != '"' {
		if s.b[s.i] != '\\' {
			s.i++
			continue
		}
		if s.i+1 < len(s.b) && s.b[s.i+1] == 'u' {
			r := s.hex(s.i + 2)
			switch {
			case r == 0:
				ok = false
			case r >= 0xD800 && r < 0xDC00:
				// A high surrogate must be followed by a low one.
				if s.i+7 < len(s.b) && s.b[s.i+6] == '\\' && s.b[s.i+7] == 'u' {
					if lo := s.hex(s.i + 8); lo >= 0xDC00 && lo < 0xE000 {
						s.i += 12
						continue
					}
				}
				ok = false
			case r >= 0xDC00 && r < 0xE000:
				ok = false
			}
			s.i += 6
			continue
		}
		s.i += 2
	}
	raw := string(s.b[start:min(s.i, len(s.b))])
	s.i++ // closing quote
	return raw, ok && storableText(raw)
}

// hex reads four hex digits at i (-1 if they are not).
func (s *textScanner) hex(i int) int {
	if i+4 > len(s.b) {
		return -1
	}
	v, err := strconv.ParseUint(string(s.b[i:i+4]), 16, 32)
	if err != nil {
		return -1
	}
	return int(v)
}

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
