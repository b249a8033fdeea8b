// Package card reads the Agent Cards of A2A agents for the registry: it
// fetches a card (with its ETag, honouring Cache-Control), tells what the
// card means for an agent's registration (skill ids as capabilities, skill
// tags as aliases, the preferred JSON-RPC interface as the endpoint), and
// judges each revalidation of a registered agent's card. The registry keeps
// the rows; this package decides what goes in them.
package card
