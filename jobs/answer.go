package jobs

import "github.com/agentreach/agentreach/domain"

// answerBytes is how much of an agent's answer an event keeps to show what
// the agent said.
const answerBytes = 256

// noteAnswer records on obs what the agent's HTTP answer was: its status,
// and the first bytes of a 200 that was not a usable result (for other
// statuses the observation's error text holds them already).
func noteAnswer(obs *domain.Observation, status int, answer []byte) {
	obs.HTTPStatus = status
	if obs.Kind == domain.ObservedFailed && obs.Reason == "bad_response" {
		obs.Body = truncate(string(answer), answerBytes)
	}
}
