package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentreach/agentreach/internal/cli"
)

const keysHelp = `agentreach keys: API keys (needs an admin key: --key or AGENTREACH_KEY)

  agentreach keys create --namespace N --scopes S1,S2 [--name NAME] [--ttl 720h]
  agentreach keys list
  agentreach keys revoke KEY_ID

Scopes: admin, jobs:read, jobs:approve, agents:read, agents:write,
agents:lookup, capabilities:read (the catalogue and intent resolution),
jobs:submit:<capability pattern> ('*' matches any run of characters).
The key is printed once; only its hash is kept. Every command takes
--server, --key and --json (the service's answer, as the API gives it).
`

func (m *Main) runKeys(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, keysHelp)
		return fmt.Errorf("%w: agentreach keys create|list|revoke", errUsage)
	}
	if cli.IsHelp(args[0]) {
		fmt.Fprint(m.Stdout, keysHelp)
		return nil
	}
	fs, c := m.apiFlags("keys " + args[0])
	fs.Usage = func() { fmt.Fprint(fs.Output(), keysHelp); fs.PrintDefaults() }
	switch args[0] {
	case "create":
		return m.keysCreate(ctx, fs, c, args[1:])
	case "list":
		return m.keysList(ctx, fs, c, args[1:])
	case "revoke":
		return m.keysRevoke(ctx, fs, c, args[1:])
	}
	fmt.Fprint(m.Stderr, keysHelp)
	return fmt.Errorf("%w: unknown keys command %q", errUsage, args[0])
}

// keysCreate is `agentreach keys create`.
func (m *Main) keysCreate(ctx context.Context, fs *cli.Flags, c *cli.Client, args []string) error {
	ns := fs.String("namespace", "", "the key's namespace (* for every namespace)")
	scopes := fs.String("scopes", "", "comma-separated scopes")
	name := fs.String("name", "", "a name to recognise the key by")
	ttl := fs.Duration("ttl", 0, "expire the key after this long (0: never)")
	if _, err := fs.ParsePositional(args); err != nil {
		return err
	}
	if *scopes == "" {
		return fmt.Errorf("%w: --scopes is required", errUsage)
	}
	body := map[string]any{"namespace": *ns, "name": *name, "scopes": splitList(*scopes), "ttl_seconds": int64(ttl.Seconds())}
	var raw json.RawMessage
	if err := c.Do(ctx, http.MethodPost, "/v1/keys", body, &raw); err != nil {
		return err
	}
	if fs.JSON {
		return cli.PrintRaw(m.Stdout, raw)
	}
	var out struct {
		Key     string          `json:"key"`
		KeyInfo json.RawMessage `json:"key_info"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("the service's new key: %w", err)
	}
	var info struct {
		KeyID     string   `json:"key_id"`
		Namespace string   `json:"namespace"`
		Scopes    []string `json:"scopes"`
	}
	_ = json.Unmarshal(out.KeyInfo, &info)
	fmt.Fprintf(m.Stdout, "%s\n\nkey id %s, namespace %s, scopes %s\nThe key is shown once: keep it now.\n",
		out.Key, info.KeyID, info.Namespace, strings.Join(info.Scopes, ","))
	return nil
}

// keysList is `agentreach keys list`.
func (m *Main) keysList(ctx context.Context, fs *cli.Flags, c *cli.Client, args []string) error {
	if _, err := fs.ParsePositional(args); err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.Do(ctx, http.MethodGet, "/v1/keys", nil, &raw); err != nil {
		return err
	}
	if fs.JSON {
		return cli.PrintRaw(m.Stdout, raw)
	}
	var out struct {
		Keys []struct {
			KeyID     string     `json:"key_id"`
			Namespace string     `json:"namespace"`
			Name      string     `json:"name"`
			Scopes    []string   `json:"scopes"`
			CreatedAt time.Time  `json:"created_at"`
			ExpiresAt *time.Time `json:"expires_at"`
			RevokedAt *time.Time `json:"revoked_at"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("the service's keys: %w", err)
	}
	tw := tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY ID\tNAMESPACE\tNAME\tSCOPES\tCREATED\tSTATUS")
	for _, k := range out.Keys {
		status := "active"
		switch {
		case k.RevokedAt != nil:
			status = "revoked " + k.RevokedAt.Format(time.RFC3339)
		case k.ExpiresAt != nil && time.Now().After(*k.ExpiresAt):
			status = "expired"
		case k.ExpiresAt != nil:
			status = "expires " + k.ExpiresAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.KeyID, k.Namespace, k.Name, strings.Join(k.Scopes, ","),
			k.CreatedAt.Format(time.RFC3339), status)
	}
	return tw.Flush()
}

// keysRevoke is `agentreach keys revoke KEY_ID`.
func (m *Main) keysRevoke(ctx context.Context, fs *cli.Flags, c *cli.Client, args []string) error {
	pos, err := fs.ParsePositional(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: agentreach keys revoke KEY_ID", errUsage)
	}
	if err := c.Do(ctx, http.MethodDelete, "/v1/keys/"+url.PathEscape(pos[0]), nil, nil); err != nil {
		return err
	}
	if fs.JSON { // the service answers 204, no body: say what was done
		return m.printJSON(map[string]any{"key_id": pos[0], "revoked": true})
	}
	fmt.Fprintf(m.Stdout, "revoked %s\n", pos[0])
	return nil
}
