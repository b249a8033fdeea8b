package domain

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// The capability catalogue of a namespace: every capability its agents
// offer or an operator described, with the words that say what it does.
// Intent resolution (IntentRanking, LexicalIndex) reads it; routing never
// does.

// Limits of a capability's description. A registration or an operator's
// edit beyond them is refused; what an Agent Card says is clipped to them.
const (
	MaxDocTitle       = 128
	MaxDocDescription = 2048
	MaxDocExamples    = 32
	MaxDocExample     = 512
	MaxDocTags        = 32
	MaxDocTag         = 128
	// MaxEntryExamples and MaxEntryTags bound what a catalogue entry
	// gathers from all its agents and the operator.
	MaxEntryExamples = 64
	MaxEntryTags     = 64
)

// EventCapabilityUpdated, on "catalogue:<namespace>": an operator's
// description of a capability (PUT /v1/capabilities/{name}), before and
// after.
const EventCapabilityUpdated EventType = "CAPABILITY_UPDATED"

// CatalogueStream is the stream of a namespace's catalogue edits.
func CatalogueStream(namespace string) string { return "catalogue:" + namespace }

// CapabilityDoc is what is said of one capability: by an agent when it
// registers (capability_info), by an A2A card's skill (name, description,
// examples, tags), or by an operator.
type CapabilityDoc struct {
	// Title is a short human name ("Track a parcel"; a skill's name).
	Title string `json:"title,omitempty"`
	// Description says what the capability does, in a sentence or two.
	Description string `json:"description,omitempty"`
	// Examples are requests a caller might make of it, in any language.
	Examples []string `json:"examples,omitempty"`
	// Tags are keywords (a skill's tags).
	Tags []string `json:"tags,omitempty"`
	// InputSchema is the JSON Schema of the payload (an object schema):
	// the input schema of the capability's MCP tool.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// MaxInputSchemaBytes bounds a capability's input schema.
const MaxInputSchemaBytes = 64 << 10

// Empty reports whether the doc says nothing.
func (d CapabilityDoc) Empty() bool {
	return d.Title == "" && d.Description == "" && len(d.Examples) == 0 && len(d.Tags) == 0 && len(d.InputSchema) == 0
}

// checkInputSchema says what is wrong with an input schema ("" for
// nothing): it must be a JSON object whose "type" is "object", as MCP
// requires of a tool's input schema.
func checkInputSchema(raw json.RawMessage) string {
	if len(raw) > MaxInputSchemaBytes {
		return fmt.Sprintf("must be at most %d bytes", MaxInputSchemaBytes)
	}
	var schema map[string]json.RawMessage
	if json.Unmarshal(raw, &schema) != nil {
		return "must be a JSON Schema object"
	}
	var typ string
	if json.Unmarshal(schema["type"], &typ) != nil || typ != "object" {
		return `must be an object schema ({"type": "object", ...}): a payload is a JSON object`
	}
	return ""
}

// Normalize trims every text, drops empty and repeated examples and tags,
// and checks the limits, returning the first problem as a *FieldError
// whose field is prefix + ".title" and so on (just "title" with no prefix).
func (d *CapabilityDoc) Normalize(prefix string) error {
	field := func(name string) string {
		if prefix == "" {
			return name
		}
		return prefix + "." + name
	}
	d.Title, d.Description = strings.TrimSpace(d.Title), strings.TrimSpace(d.Description)
	d.Examples, d.Tags = cleanTexts(d.Examples), cleanTexts(d.Tags)
	switch {
	case utf8.RuneCountInString(d.Title) > MaxDocTitle:
		return fieldErr(field("title"), "must be at most %d characters", MaxDocTitle)
	case utf8.RuneCountInString(d.Description) > MaxDocDescription:
		return fieldErr(field("description"), "must be at most %d characters", MaxDocDescription)
	case len(d.Examples) > MaxDocExamples:
		return fieldErr(field("examples"), "must list at most %d examples", MaxDocExamples)
	case len(d.Tags) > MaxDocTags:
		return fieldErr(field("tags"), "must list at most %d tags", MaxDocTags)
	}
	for _, e := range d.Examples {
		if utf8.RuneCountInString(e) > MaxDocExample {
			return fieldErr(field("examples"), "each example must be at most %d characters", MaxDocExample)
		}
	}
	for _, t := range d.Tags {
		if utf8.RuneCountInString(t) > MaxDocTag {
			return fieldErr(field("tags"), "each tag must be at most %d characters", MaxDocTag)
		}
	}
	if len(d.InputSchema) > 0 && string(d.InputSchema) != "null" {
		if why := checkInputSchema(d.InputSchema); why != "" {
			return fieldErr(field("input_schema"), "%s", why)
		}
	} else {
		d.InputSchema = nil
	}
	return nil
}

// Clip is Normalize that cuts what is too long instead of refusing it: for
// what an Agent Card says, which the registry takes as it is.
func (d CapabilityDoc) Clip() CapabilityDoc {
	d.Title, d.Description = clipRunes(strings.TrimSpace(d.Title), MaxDocTitle), clipRunes(strings.TrimSpace(d.Description), MaxDocDescription)
	d.Examples, d.Tags = cleanTexts(d.Examples), cleanTexts(d.Tags)
	d.Examples, d.Tags = d.Examples[:min(len(d.Examples), MaxDocExamples)], d.Tags[:min(len(d.Tags), MaxDocTags)]
	for i := range d.Examples {
		d.Examples[i] = clipRunes(d.Examples[i], MaxDocExample)
	}
	for i := range d.Tags {
		d.Tags[i] = clipRunes(d.Tags[i], MaxDocTag)
	}
	return d
}

// Text is everything the doc says, for fingerprinting.
func (d CapabilityDoc) Text() string {
	return d.Title + "\n" + d.Description + "\n" + strings.Join(d.Examples, "\n") + "\n" + strings.Join(d.Tags, "\n")
}

func cleanTexts(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// normalizeDocs checks a registration's capability_info: each key one of
// the agent's capabilities, each doc within the limits.
func (r *AgentRegistration) normalizeDocs() error {
	for c, d := range r.CapabilityInfo {
		field := "capability_info[" + c + "]"
		if !slices.Contains(r.Capabilities, c) {
			return fieldErr(field, "%q is not one of the agent's capabilities", c)
		}
		if err := d.Normalize(field); err != nil {
			return err
		}
		if d.Empty() {
			delete(r.CapabilityInfo, c)
			continue
		}
		r.CapabilityInfo[c] = d
	}
	if len(r.CapabilityInfo) == 0 {
		r.CapabilityInfo = nil
	}
	return nil
}

// CapabilityUpdated is the data of CAPABILITY_UPDATED: the operator's doc
// of the capability before (nil: none) and after (nil: removed).
type CapabilityUpdated struct {
	Namespace  string         `json:"namespace"`
	Capability string         `json:"capability"`
	From       *CapabilityDoc `json:"from"`
	To         *CapabilityDoc `json:"to"`
}

// CatalogueAgent is one agent as the catalogue sees it: what it offers and
// the words it goes by.
type CatalogueAgent struct {
	ID           string
	Capabilities []string
	Aliases      []string
	// RegisteredAt orders agents' input schemas: the newest registration's
	// is the capability's, unless an operator gave one.
	RegisteredAt time.Time
	// Docs are what it said of its capabilities, by capability.
	Docs map[string]CapabilityDoc
}

// CapabilityNote is an operator's doc of a capability.
type CapabilityNote struct {
	Capability string
	Doc        CapabilityDoc
	UpdatedBy  string
	UpdatedAt  time.Time
}

// CatalogueEntry is one capability of a namespace's catalogue.
type CatalogueEntry struct {
	Name        string   `json:"name"`
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description,omitempty"`
	Examples    []string `json:"examples,omitempty"`
	// Tags are the docs' tags and the aliases of the agents that offer it.
	Tags []string `json:"tags,omitempty"`
	// Agents offer it now (registered, not deregistered), by id.
	Agents []string `json:"agents"`
	// Note is the operator's doc, if there is one.
	Note *CapabilityNote `json:"-"`
	// InputSchema is the payload's JSON Schema: the operator's, else the
	// newest registration's among the agents that offer it (none: any
	// object). SchemaWarning says when the agents' schemas disagree.
	InputSchema   json.RawMessage `json:"input_schema,omitempty"`
	SchemaWarning string          `json:"schema_warning,omitempty"`
}

// Catalogue is a namespace's capability catalogue at one version. The
// version grows with every change of what it says (a registration, a card,
// an operator's edit), and cached model answers name the version they were
// given for.
type Catalogue struct {
	Namespace string
	Version   int64
	Entries   []CatalogueEntry // by name
}

// Fingerprint is the SHA-256 of what the catalogue says: every entry's
// name, title, description, examples and tags, in order. Two versions that
// say the same (a replica of a known agent joined, one left) have one
// fingerprint; which agents offer an entry is not part of it.
func (c *Catalogue) Fingerprint() []byte {
	h := sha256.New()
	for _, e := range c.Entries {
		for _, part := range []string{e.Name, e.Title, e.Description, strings.Join(e.Examples, "\x1f"), strings.Join(e.Tags, "\x1f")} {
			h.Write([]byte(part))
			h.Write([]byte{0})
		}
		h.Write([]byte{'\n'})
	}
	return h.Sum(nil)
}

// Entry returns the entry of capability name.
func (c *Catalogue) Entry(name string) (CatalogueEntry, bool) {
	i, ok := slices.BinarySearchFunc(c.Entries, name, func(e CatalogueEntry, n string) int { return strings.Compare(e.Name, n) })
	if !ok {
		return CatalogueEntry{}, false
	}
	return c.Entries[i], true
}

// BuildCatalogue merges what agents and operators say into one entry per
// capability, sorted by name. A capability is in the catalogue when an
// agent offers it or an operator described it. The operator's title and
// description win; examples and tags gather the operator's first, then
// each agent's in agent id order, without repeats, up to the entry limits.
func BuildCatalogue(namespace string, version int64, agents []CatalogueAgent, notes []CapabilityNote) Catalogue {
	agents = slices.Clone(agents)
	slices.SortFunc(agents, func(a, b CatalogueAgent) int { return strings.Compare(a.ID, b.ID) })
	byName := map[string]*CatalogueEntry{}
	entry := func(name string) *CatalogueEntry {
		e := byName[name]
		if e == nil {
			e = &CatalogueEntry{Name: name, Agents: []string{}}
			byName[name] = e
		}
		return e
	}
	for i := range notes {
		n := notes[i]
		e := entry(n.Capability)
		e.Note = &n
		e.Title, e.Description, e.InputSchema = n.Doc.Title, n.Doc.Description, n.Doc.InputSchema
		e.Examples = appendNew(e.Examples, MaxEntryExamples, n.Doc.Examples...)
		e.Tags = appendNew(e.Tags, MaxEntryTags, n.Doc.Tags...)
	}
	schemaAt := map[string]time.Time{} // when the entry's agent schema was registered
	schemaOf := map[string]string{}    // which agent gave it
	for _, a := range agents {
		for _, c := range a.Capabilities {
			e := entry(c)
			if d := a.Docs[c]; len(d.InputSchema) > 0 {
				switch {
				case e.Note != nil && len(e.Note.Doc.InputSchema) > 0:
					if !jsonEqual(d.InputSchema, e.InputSchema) {
						e.SchemaWarning = "agent " + a.ID + " registered another input schema; the operator's is used"
					}
				case len(e.InputSchema) == 0 || a.RegisteredAt.After(schemaAt[c]):
					if len(e.InputSchema) > 0 && !jsonEqual(d.InputSchema, e.InputSchema) {
						e.SchemaWarning = "the agents registered different input schemas; the newest registration's (agent " + a.ID + ") is used"
					}
					e.InputSchema, schemaAt[c], schemaOf[c] = d.InputSchema, a.RegisteredAt, a.ID
				case !jsonEqual(d.InputSchema, e.InputSchema):
					e.SchemaWarning = "the agents registered different input schemas; the newest registration's (agent " + schemaOf[c] + ") is used"
				}
			}
			if !slices.Contains(e.Agents, a.ID) {
				e.Agents = append(e.Agents, a.ID)
			}
			d := a.Docs[c]
			if e.Title == "" {
				e.Title = d.Title
			}
			if e.Description == "" {
				e.Description = d.Description
			}
			e.Examples = appendNew(e.Examples, MaxEntryExamples, d.Examples...)
			e.Tags = appendNew(e.Tags, MaxEntryTags, d.Tags...)
			e.Tags = appendNew(e.Tags, MaxEntryTags, a.Aliases...)
		}
	}
	out := Catalogue{Namespace: namespace, Version: version, Entries: make([]CatalogueEntry, 0, len(byName))}
	for _, e := range byName {
		out.Entries = append(out.Entries, *e)
	}
	slices.SortFunc(out.Entries, func(a, b CatalogueEntry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// appendNew appends the values of vs not in dst yet, while dst is shorter
// than limit.
func appendNew(dst []string, limit int, vs ...string) []string {
	for _, v := range vs {
		if len(dst) >= limit {
			break
		}
		if v != "" && !slices.Contains(dst, v) {
			dst = append(dst, v)
		}
	}
	return dst
}
