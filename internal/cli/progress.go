package cli

import (
	"fmt"
	"io"
	"strings"
)

// ProgressBar draws "label [#####.....] 50% 500/1000 events" on one line,
// redrawn in place.
type ProgressBar struct {
	W     io.Writer
	Label string
	Unit  string // "events" when empty
	drawn bool
}

// Update redraws the bar at done of total.
func (b *ProgressBar) Update(done, total int64) {
	const width = 30
	if total <= 0 {
		total = 1
	}
	filled := int(float64(width) * float64(done) / float64(total))
	unit := b.Unit
	if unit == "" {
		unit = "events"
	}
	fmt.Fprintf(b.W, "\r%s [%s%s] %3d%% %d/%d %s", b.Label, strings.Repeat("#", filled),
		strings.Repeat(".", width-filled), 100*done/total, done, total, unit)
	b.drawn = true
}

// Done ends the bar's line, if it was drawn.
func (b *ProgressBar) Done() {
	if b.drawn {
		fmt.Fprintln(b.W)
	}
}
