package domain

import (
	"encoding/json"
	"fmt"
	"time"
)

// MaxExtend is the most one progress report extends an attempt's deadline
// by, from the time of the report.
const MaxExtend = time.Hour

// Progressed is the data of PROGRESS: how far the agent working on an
// attempt got (its own words), and the attempt's deadline after it.
type Progressed struct {
	Attempt  int             `json:"attempt"`
	AgentID  string          `json:"agent_id"`
	Progress json.RawMessage `json:"progress,omitempty"`
	// ExtendMS is what the agent asked for; Deadline what it has now
	// (never earlier than before: a report cannot shorten it).
	ExtendMS int64     `json:"extend_ms,omitempty"`
	Deadline time.Time `json:"deadline"`
}

// Progress decides an agent's progress report for attempt of j: a PROGRESS
// event with the deadline moved to now+extend when that is later, and the
// attempt's delivered timer moved with it. Only the attempt the agent holds
// now, delivered and unanswered, takes a report: any other is a conflict
// (the agent should stop working on it).
func Progress(j *Job, attempt int, agentID string, extend time.Duration, progress json.RawMessage, now time.Time, md Metadata) ([]Event, Effects, error) {
	if attempt != j.Attempts || j.Status != StatusDelivered {
		return nil, Effects{}, &KindError{Kind: ErrConflict,
			Message: fmt.Sprintf("attempt %d of job %s is not running (the job is %s at attempt %d): stop working on it",
				attempt, j.JobID, j.Status, j.Attempts)}
	}
	deadline := j.Deadline
	if d := now.Add(min(extend, MaxExtend)); extend > 0 && d.After(deadline) {
		deadline = d
	}
	e := NewEvent(EventProgress, Progressed{Attempt: attempt, AgentID: agentID, Progress: progress,
		ExtendMS: extend.Milliseconds(), Deadline: deadline}, md)
	var fx Effects
	if !deadline.Equal(j.Deadline) {
		fx.Timer = &Timer{Attempt: attempt, AgentID: agentID, Phase: PhaseDelivered, Due: deadline}
	}
	return []Event{e}, fx, nil
}
