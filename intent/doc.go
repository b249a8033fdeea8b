// Package intent resolves a caller's intent ("where is my parcel", "我的包裹在
// 哪里") to one capability of a namespace's catalogue.
//
// Resolvers sit behind one interface (Resolver) and run in order, each only
// when the ones before it were not confident: the built-in lexical resolver
// (domain.LexicalIndex, which needs nothing and always runs), then, when
// configured, an embedding resolver (any OpenAI-compatible /embeddings
// endpoint: Ollama, vLLM, a hosted API) and an LLM fallback (any
// OpenAI-compatible /chat/completions endpoint, asked to choose one of the
// catalogue's names). Every model answer is kept in PostgreSQL by
// namespace, model, catalogue version and normalised intent, so a repeated
// intent never calls a model twice; a model that fails or times out is a
// step the resolution records, never an error of the resolution, and is
// left alone for a short cool-down.
//
// The catalogue (Catalogue) is built from what agents registered
// (capabilities, aliases, capability_info, their cards' skills) and what
// operators wrote (Describe), and carries a version that the database bumps
// on every change; this package reloads it when the version moved.
//
// Outbound model calls go through the service's SSRF guard (netguard), the
// key is sent only as a bearer token and never logged or recorded.
package intent
