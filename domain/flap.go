package domain

import (
	"math"
	"time"
)

// Flap damping: an agent that re-registered FlapRestarts or more times in
// FlapWindow is flapping. It must pass FlapProbes probes in a row before it
// is HEALTHY, and its routing score loses FlapPenaltyMax, halving every
// FlapHalfLife since its last registration.
const (
	FlapRestarts   = 3
	FlapWindow     = time.Hour
	FlapProbes     = 3
	FlapPenaltyMax = 20.0
	FlapHalfLife   = 10 * time.Minute
)

// Flapping reports whether restarts re-registrations within FlapWindow make
// an agent a flapping one.
func Flapping(restarts int) bool { return restarts >= FlapRestarts }

// ProbesNeeded is how many probes in a row an agent must pass to leave
// PROBING.
func ProbesNeeded(restarts int) int {
	if Flapping(restarts) {
		return FlapProbes
	}
	return 1
}

// FlapPenalty is the score a flapping agent loses at now, last registered
// at registeredAt: FlapPenaltyMax, halving every FlapHalfLife, and nothing
// once its restarts are out of the window or it does not flap.
func FlapPenalty(restarts int, registeredAt, now time.Time) float64 {
	age := now.Sub(registeredAt)
	if !Flapping(restarts) || age >= FlapWindow {
		return 0
	}
	return FlapPenaltyMax * math.Pow(0.5, max(0, age.Seconds())/FlapHalfLife.Seconds())
}
