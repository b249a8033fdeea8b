package intent

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentreach/agentreach/domain"
)

// llm asks a chat model to choose one of the catalogue's names for an
// intent. It shows the model the names (with each one's title or
// description), the best ranked by the resolvers before it first, up to
// maxChoices, and counts only an answer that is exactly one of them: the
// model can neither invent a capability nor be talked into one by the
// intent's words.
type llm struct {
	client     *modelClient
	maxChoices int
}

func (l *llm) Name() string  { return domain.ResolverLLM }
func (l *llm) Model() string { return l.client.cfg.Model }

// llmSystem is the instruction the model gets.
const llmSystem = "You route a user's request to one capability of a service. " +
	"Answer with exactly one capability name from the list, copied as it is, and nothing else. " +
	"If no capability fits the request, answer: none"

func (l *llm) Rank(ctx context.Context, cat *Catalogue, intent string, prior domain.IntentRanking) (domain.IntentRanking, error) {
	names := choices(cat, prior, l.maxChoices)
	var b strings.Builder
	b.WriteString("Capabilities:\n")
	for _, n := range names {
		e, _ := cat.Entry(n)
		fmt.Fprintf(&b, "- %s", n)
		var about []string
		for _, t := range []string{e.Title, e.Description} {
			if t != "" {
				about = append(about, strings.ReplaceAll(t, "\n", " "))
			}
		}
		if len(about) > 0 {
			fmt.Fprintf(&b, ": %s", strings.Join(about, ". "))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "\nRequest: %s\nCapability:", strings.ReplaceAll(intent, "\n", " "))
	answer, err := l.client.chat(ctx, []chatMessage{{Role: "system", Content: llmSystem}, {Role: "user", Content: b.String()}})
	if err != nil {
		return domain.IntentRanking{}, err
	}
	return domain.ChoiceRanking(l.Model(), answer, names), nil
}

// choices are the names shown to the model: prior's candidates first,
// then the rest of the catalogue by name, at most limit.
func choices(cat *Catalogue, prior domain.IntentRanking, limit int) []string {
	out := make([]string, 0, min(limit, len(cat.Names)))
	for _, c := range prior.Candidates {
		if len(out) < limit && !slices.Contains(out, c.Capability) {
			out = append(out, c.Capability)
		}
	}
	for _, n := range cat.Names {
		if len(out) >= limit {
			break
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
