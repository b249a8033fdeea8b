package cli

import "flag"

// SecretVar defines a string flag whose value, from the environment or the
// command line, is never shown: -h prints no default for it, so a key, a
// secret or a database URL with a password set in the environment does not
// end up on a terminal or in a log of the help text.
func SecretVar(fs *flag.FlagSet, p *string, name, value, usage string) {
	*p = value
	fs.Var(secret{p}, name, usage)
}

type secret struct{ p *string }

// String is empty, so the flag package prints no default.
func (s secret) String() string { return "" }

func (s secret) Set(v string) error { *s.p = v; return nil }
