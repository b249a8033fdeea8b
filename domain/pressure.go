package domain

// Backpressure defaults, per namespace and lane (priority): queue depth is
// the jobs waiting for an attempt (SUBMITTED or TIMEOUT).
const (
	// DefaultQueueHigh: above it, low work of the namespace is held back
	// (it waits without spending an attempt) and QUEUE_HIGH is raised.
	DefaultQueueHigh = 10_000
	// DefaultQueueLow: under it again, held work goes on and QUEUE_NORMAL
	// is raised. The gap keeps a depth hovering at the mark from flapping.
	DefaultQueueLow = 5_000
	// DefaultQueueLimit: at or above it, submits to the lane are refused
	// with 429 overloaded and nothing is written.
	DefaultQueueLimit = 50_000
)

// Watermarks are the backpressure thresholds of one lane of a namespace.
type Watermarks struct {
	High, Low, Limit int
}

// WithDefaults fills the zero thresholds and keeps Low under High.
func (w Watermarks) WithDefaults() Watermarks {
	if w.High <= 0 {
		w.High = DefaultQueueHigh
	}
	if w.Low <= 0 || w.Low >= w.High {
		w.Low = min(DefaultQueueLow, w.High/2)
	}
	if w.Limit <= 0 {
		w.Limit = max(DefaultQueueLimit, w.High)
	}
	return w
}

// QueueHigh decides whether a lane is high after seeing depth, given
// whether it was high: it turns high above High and back only under Low.
func (w Watermarks) QueueHigh(wasHigh bool, depth int) bool {
	if wasHigh {
		return depth >= w.Low
	}
	return depth > w.High
}

// Overloaded reports whether a submit to a lane of that depth is refused.
func (w Watermarks) Overloaded(depth int) bool { return depth >= w.Limit }

// Admit decides which of want submits, in the order they came, a lane
// of that depth takes under limit (0: no limit): the first ones while the
// depth stays within it. It answers how many.
func Admit(depth, want, limit int) int {
	if limit <= 0 {
		return want
	}
	return max(min(want, limit-depth), 0)
}

// QueueLevelChanged is the data of QUEUE_HIGH and QUEUE_NORMAL, on the
// stream "queue:<namespace>/<lane>".
type QueueLevelChanged struct {
	Namespace string   `json:"namespace"`
	Lane      Priority `json:"lane"`
	Depth     int      `json:"depth"`
	Mark      int      `json:"mark"` // the watermark crossed
}

// Queue events.
const (
	EventQueueHigh   EventType = "QUEUE_HIGH"
	EventQueueNormal EventType = "QUEUE_NORMAL"
)

// QueueStream is the stream of a namespace's lane's level changes.
func QueueStream(namespace string, lane Priority) string {
	return "queue:" + namespace + "/" + string(lane)
}
