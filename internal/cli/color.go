package cli

import (
	"io"
	"os"
)

// TerminalWriter is a writer that says whether it is a terminal; tests
// stand for one with it. An *os.File is asked the system.
type TerminalWriter interface {
	io.Writer
	IsTerminal() bool
}

// IsTerminal reports whether w is a terminal: a TerminalWriter that says
// so, or an *os.File on a character device other than /dev/null. Any other
// writer (a pipe, a file, a buffer) is not.
func IsTerminal(w io.Writer) bool {
	switch w := w.(type) {
	case TerminalWriter:
		return w.IsTerminal()
	case *os.File:
		st, err := w.Stat()
		if err != nil || st.Mode()&os.ModeCharDevice == 0 {
			return false
		}
		if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(st, null) {
			return false
		}
		return true
	}
	return false
}

// palette colours the words the tables show: job statuses, event types,
// agent states and breaker states. Off, it leaves them as they are.
type palette struct{ on bool }

// paletteFor is the palette of what a command writes to w: colours only
// on a terminal, never with --json (jsonOut), nor when NO_COLOR is set to
// anything, nor on TERM=dumb.
func (e Env) paletteFor(w io.Writer, jsonOut bool) palette {
	return palette{on: !jsonOut && e.Getenv("NO_COLOR") == "" && e.Getenv("TERM") != "dumb" && IsTerminal(w)}
}

// The colours, all escapes of the same length so that tab-aligned cells
// coloured alike stay aligned (see cell).
const (
	ansiGreen  = "\x1b[32m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiPlain  = "\x1b[39m" // the default colour
	ansiReset  = "\x1b[0m"
)

// colourOf is the colour of a status, state or event type: green for what
// went well, red for what failed or is down, yellow for what is on its
// way or held; "" for the rest.
func colourOf(word string) string {
	switch word {
	case "SUCCESS", "HEALTHY":
		return ansiGreen
	case "FAILED", "DEAD_LETTER", "REJECTED", "DOWN", "open":
		return ansiRed
	case "PROBING", "SUSPECT", "DRAINING", "CANCELLED", "TIMEOUT", "ATTEMPT_FAILED", "AWAITING_APPROVAL", "AWAITING_INPUT", "half_open", "half-open":
		return ansiYellow
	}
	return ""
}

// word colours s by what key (the word s shows, maybe padded) means.
func (p palette) word(key, s string) string {
	c := colourOf(key)
	if !p.on || c == "" {
		return s
	}
	return c + s + ansiReset
}

// cell is word for a cell of a column a tabwriter aligns: on, every cell
// of the column is wrapped in escapes of the same length, coloured or
// not, so that the tabwriter, which counts them, pads every row alike.
func (p palette) cell(s string) string {
	if !p.on {
		return s
	}
	c := colourOf(s)
	if c == "" {
		c = ansiPlain
	}
	return c + s + ansiReset
}
