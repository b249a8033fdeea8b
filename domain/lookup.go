package domain

import (
	"fmt"
	"time"
)

// EventDirectReported, on "direct:<namespace>/<agent_id>/<batch>": a caller's
// reports of the calls it made to the agent itself (lookup mode). The
// agent's figures count them as they count brokered attempts.
const EventDirectReported EventType = "DIRECT_REPORTED"

// DirectStreamPrefix starts the stream of every agent's direct reports.
const DirectStreamPrefix = "direct:"

// DirectStream is the stream of one batch of agent k's direct reports:
// each batch has a stream of its own, so concurrent reports never contend
// for one stream's next version. ReadStreams(DirectStreamPrefix+k+"/")
// reads an agent's.
func DirectStream(k AgentKey, batch string) string {
	return DirectStreamPrefix + k.String() + "/" + batch
}

// DirectReport is one direct call a caller made and what came of it.
// Reached: the agent took the call and answered a result (SUCCESS or
// FAILED); a connection error, a timeout or a 5xx is not reached, as for a
// brokered delivery. OK: the result was SUCCESS. BizCode: a FAILED
// result's code.
type DirectReport struct {
	AgentID    string    `json:"agent_id"`
	Capability string    `json:"capability"`
	Reached    bool      `json:"reached"`
	OK         bool      `json:"ok"`
	LatencyMS  float64   `json:"latency_ms"`
	BizCode    string    `json:"biz_code,omitempty"`
	At         time.Time `json:"at"`
}

// DirectReported is the data of DIRECT_REPORTED: one batch's reports of
// one agent, by the API key KeyID.
type DirectReported struct {
	KeyID   string         `json:"key_id"`
	Reports []DirectReport `json:"reports"`
}

// MaxReportLatencyMS bounds a reported latency (an hour).
const MaxReportLatencyMS = 3_600_000

// Validate checks a report received at now (a zero At means now) and fills
// its defaults; the problem is a *FieldError naming the field.
func (r *DirectReport) Validate(now time.Time) error {
	switch {
	case !ValidAgentID(r.AgentID):
		return fieldErr("agent_id", "must be the id of an agent you looked up")
	case !ValidCapability(r.Capability):
		return fieldErr("capability", "must be a well-formed capability, e.g. document:parse:ocr")
	case !(r.LatencyMS >= 0 && r.LatencyMS <= MaxReportLatencyMS):
		return fieldErr("latency_ms", "must be between 0 and %d", MaxReportLatencyMS)
	case len(r.BizCode) > 128:
		return fieldErr("biz_code", "must be at most 128 characters")
	case r.OK && !r.Reached:
		return fieldErr("ok", "a call that did not reach the agent cannot be ok")
	}
	if r.At.IsZero() {
		r.At = now
	}
	if r.At.Before(now.Add(-ReportWindow)) || r.At.After(now.Add(time.Minute)) {
		return fieldErr("at", "must be within the last %s (and not in the future)", ReportWindow)
	}
	r.At = r.At.UTC()
	return nil
}

// ReportSample is the breaker's sample of a direct call: as for a brokered
// attempt, an answered call (even a business failure) is a success.
func (r DirectReport) ReportSample() Sample {
	return Sample{AgentID: r.AgentID, At: r.At, OK: r.Reached}
}

// String names a report in errors.
func (r DirectReport) String() string { return fmt.Sprintf("%s/%s", r.AgentID, r.Capability) }
