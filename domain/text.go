package domain

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PostgreSQL stores neither NUL (in text, nor \u0000 in jsonb) nor a UTF-16
// surrogate without its partner (jsonb refuses \ud800), nor bytes that are
// not UTF-8, nor a JSON number beyond numeric's range (131072 digits before
// the point, 16383 after). Such input is refused where it enters (the API's
// edge, an agent's answer), naming where it stands, so it never reaches a
// transaction (where it would fail, and in a group commit, fail the other
// members too).

// StorableText reports whether s can be stored as PostgreSQL text.
func StorableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// UnstorableJSON returns the path (a.b[2].c; "" for the document itself)
// of the first string, key or number in the JSON document b that
// PostgreSQL cannot store, and whether there is one. b must be valid JSON.
// It allocates only to name a path it refuses.
func UnstorableJSON(b []byte) (string, bool) {
	sc := textScanner{b: b}
	sc.value()
	if !sc.found {
		return "", false
	}
	return sc.bad, true
}

// pathElem is one step of the path to a value: a key (b[from:to]) or an
// array index.
type pathElem struct {
	from, to int
	index    int
	isIndex  bool
}

type textScanner struct {
	b     []byte
	i     int
	path  []pathElem
	bad   string
	found bool
}

// fail records the current path as the first that cannot be stored.
func (s *textScanner) fail() {
	var sb strings.Builder
	for _, e := range s.path {
		if e.isIndex {
			sb.WriteString("[" + strconv.Itoa(e.index) + "]")
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.Write(s.b[e.from:e.to])
	}
	s.bad, s.found = sb.String(), true
}

func (s *textScanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *textScanner) value() {
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
			from, to, ok := s.str()
			s.path = append(s.path, pathElem{from: from, to: to})
			if !ok {
				s.fail()
				return
			}
			s.ws()
			s.i++ // ':'
			s.value()
			s.path = s.path[:len(s.path)-1]
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
			s.path = append(s.path, pathElem{index: n, isIndex: true})
			s.value()
			s.path = s.path[:len(s.path)-1]
		}
	case '"':
		if _, _, ok := s.str(); !ok {
			s.fail()
		}
	default: // number, true, false, null
		start := s.i
		for s.i < len(s.b) && !strings.ContainsRune(",]} \t\r\n", rune(s.b[s.i])) {
			s.i++
		}
		if !storableNumber(s.b[start:s.i]) {
			s.fail()
		}
	}
}

// str reads a string literal at s.i and returns where its raw text lies
// (escapes left as they are, for naming a key) and whether it is storable.
func (s *textScanner) str() (from, to int, ok bool) {
	s.i++ // opening quote
	from, ok = s.i, true
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
	to = min(s.i, len(s.b))
	s.i++ // closing quote
	raw := s.b[from:to]
	return from, to, ok && utf8.Valid(raw) && bytes.IndexByte(raw, 0) < 0
}

// hex reads four hex digits at i (-1 if they are not).
func (s *textScanner) hex(i int) int {
	if i+4 > len(s.b) {
		return -1
	}
	v := 0
	for _, c := range s.b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | int(c-'A'+10)
		default:
			return -1
		}
	}
	return v
}

// PostgreSQL's numeric holds up to 131072 digits before the decimal point
// and 16383 after it; jsonb keeps JSON numbers as numeric.
const (
	maxIntDigits  = 131072
	maxFracDigits = 16383
)

// storableNumber reports whether a JSON literal (a number, or true, false,
// null) fits numeric: its digits before and after the point, with the
// exponent applied.
func storableNumber(lit []byte) bool {
	if len(lit) == 0 || (lit[0] != '-' && (lit[0] < '0' || lit[0] > '9')) {
		return true // true, false, null
	}
	mant, exp, _ := strings.Cut(strings.ToLower(string(lit)), "e")
	ip, fp, _ := strings.Cut(strings.TrimPrefix(mant, "-"), ".")
	ip = strings.TrimLeft(ip, "0")
	fp = strings.TrimRight(fp, "0")
	if ip == "" && fp == "" {
		return true // zero, whatever its exponent
	}
	e := 0
	if exp != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(exp, "+"))
		if err != nil || n > 10*maxIntDigits || n < -10*maxIntDigits {
			return false
		}
		e = n
	}
	// The most significant digit's place, and the least significant's.
	top := len(ip) + e
	if ip == "" {
		top = e - (len(fp) - len(strings.TrimLeft(fp, "0")))
	}
	bottom := -len(fp) + e
	return top <= maxIntDigits && -bottom <= maxFracDigits
}
