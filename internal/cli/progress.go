package cli

import (
	"fmt"
	"io"
	"strings"
)

// ProgressBar draws "label [#####.....] 50% 500/1000 events" on one line,
// redrawn in place, when W is a terminal; on anything else (a pipe, a
// log file) it prints plain lines instead, "label  50% 500/1000 events",
// one at each tenth of the way and the last.
type ProgressBar struct {
	W     io.Writer
	Label string
	Unit  string // "events" when empty
	drawn bool

	checked, plain bool  // whether W was asked if it is a terminal, and its answer
	tenth          int64 // the last tenth printed as a plain line
	pending        string
}

// Update redraws the bar at done of total.
func (b *ProgressBar) Update(done, total int64) {
	const width = 30
	if total <= 0 {
		total = 1
	}
	if !b.checked {
		b.checked, b.plain = true, !IsTerminal(b.W)
	}
	unit := b.Unit
	if unit == "" {
		unit = "events"
	}
	pct := 100 * done / total
	if b.plain {
		line := fmt.Sprintf("%s %3d%% %d/%d %s\n", b.Label, pct, done, total, unit)
		if tenth := pct / 10; !b.drawn || tenth != b.tenth {
			fmt.Fprint(b.W, line)
			b.drawn, b.tenth, b.pending = true, tenth, ""
			return
		}
		b.pending = line // printed by Done unless a later line is
		return
	}
	filled := max(0, min(width, int(float64(width)*float64(done)/float64(total))))
	fmt.Fprintf(b.W, "\r%s [%s%s] %3d%% %d/%d %s", b.Label, strings.Repeat("#", filled),
		strings.Repeat(".", width-filled), pct, done, total, unit)
	b.drawn = true
}

// Done ends the bar's line, if it was drawn; plain, it prints the last
// state if its line was not printed yet.
func (b *ProgressBar) Done() {
	switch {
	case b.plain && b.pending != "":
		fmt.Fprint(b.W, b.pending)
		b.pending = ""
	case b.drawn && !b.plain:
		fmt.Fprintln(b.W)
	}
}
