package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

var keyHelp = help{
	usage: "key create|list|revoke|budget [KEY] [flags]",
	about: `Manages API keys: bearer tokens (Authorization: Bearer …) for bots and people, each
seeing only the sessions made through it (--sessions all: every session), with an optional
budget across its sessions. create prints the token once; the server keeps only its hash.
revoke and budget name a key by id or name. By default the command goes through the
running server's API (the operator's password, not a key); with --db it works on the
database directly: a SQLite file only while no server runs on it, a PostgreSQL database at
any time (every node refuses a revoked key within a second).`,
	minArgs: 1, maxArgs: 2,
	examples: []string{
		"agentd key create --name ci",
		"agentd key create --name ops --sessions all --budget tokens=2000000,cost=20",
		"agentd key list",
		"agentd key revoke ci",
		"agentd key budget ci --budget cost=5",
		"agentd key create --name first --db ~/.local/share/agentd/agentd.db   # before the first serve",
	},
	env:   append(clientEnv, "AGENTD_DATABASE_URL      the database for --db when it is given empty"),
	exits: []string{"1  an error, or no such key"},
}

// keyAdmin is where the key command does its work: the API or the
// database.
type keyAdmin interface {
	create(ctx context.Context, spec access.Spec) (access.KeyInfo, error)
	list(ctx context.Context) ([]access.KeyInfo, error)
	revoke(ctx context.Context, idOrName string) (access.KeyInfo, error)
	budget(ctx context.Context, idOrName string, b core.Budget) (access.KeyInfo, error)
}

func cmdKey(ctx context.Context, args []string) error {
	fs := newFlags("key")
	url := fs.String("url", defaultURL(), "server URL (the API is used unless --db is given)")
	db := fs.String("db", "", "work on this database directly (SQLite file or postgres://…) instead of the API")
	name := fs.String("name", "", "create: the key's name (letters, digits, - _ .)")
	sessions := fs.String("sessions", "own", "create: the sessions the key sees, own or all")
	budgetFlag := fs.String("budget", "", "create, budget: caps across the key's sessions, tokens=N,cost=USD (either; none lifts them)")
	asJSON := fs.Bool("json", false, "print JSON (create: with the token)")
	pos, err := parse(fs, keyHelp, args)
	if err != nil {
		return err
	}
	b, err := parseBudget(*budgetFlag)
	if err != nil {
		return usageError(fs, err.Error())
	}
	if flagSet(fs, "db") && *db == "" {
		*db = os.Getenv("AGENTD_DATABASE_URL")
	}
	var admin keyAdmin = apiKeys{newClient(*url)}
	if *db != "" {
		keys, closeDB, err := app.OpenKeys(ctx, *db, slog.New(slog.DiscardHandler))
		if err != nil {
			return err
		}
		defer closeDB()
		admin = dbKeys{keys}
	}
	sub, target := pos[0], ""
	if len(pos) > 1 {
		target = pos[1]
	}
	if (sub == "revoke" || sub == "budget") != (target != "") {
		return usageError(fs, "revoke and budget take one key (id or name); create and list take none")
	}
	if sub == "create" && *sessions != "own" && *sessions != "all" {
		return usageError(fs, fmt.Sprintf("--sessions %q: want own or all", *sessions))
	}
	done, err := keySub(ctx, admin, sub, target, access.Spec{Name: *name, All: *sessions == "all", Budget: b}, *asJSON)
	if !done {
		return usageError(fs, fmt.Sprintf("unknown subcommand %q: want create, list, revoke or budget", sub))
	}
	return err
}

// keySub runs one subcommand of key (spec is create's; its budget is
// budget's too); done is false for an unknown one.
func keySub(ctx context.Context, admin keyAdmin, sub, target string, spec access.Spec, asJSON bool) (done bool, err error) {
	switch sub {
	case "create":
		k, err := admin.create(ctx, spec)
		if err != nil {
			return true, err
		}
		if asJSON {
			return true, printJSON(k)
		}
		printMade(os.Stdout, k)
		return true, nil
	case "list":
		list, err := admin.list(ctx)
		if err != nil || asJSON {
			if err == nil {
				err = printJSON(list)
			}
			return true, err
		}
		return true, printKeys(os.Stdout, list)
	case "revoke", "budget":
		var k access.KeyInfo
		if sub == "revoke" {
			k, err = admin.revoke(ctx, target)
		} else {
			k, err = admin.budget(ctx, target, spec.Budget)
		}
		if err != nil || asJSON {
			if err == nil {
				err = printJSON(k)
			}
			return true, err
		}
		return true, printKeys(os.Stdout, []access.KeyInfo{k})
	}
	return false, nil
}

// parseBudget reads tokens=N,cost=USD (either, in any order; "" or none:
// no caps).
func parseBudget(s string) (core.Budget, error) {
	var b core.Budget
	if s == "" || s == "none" {
		return b, nil
	}
	for _, f := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		var err error
		switch {
		case ok && k == "tokens":
			b.Tokens, err = strconv.ParseInt(strings.ReplaceAll(v, "_", ""), 10, 64)
		case ok && k == "cost":
			b.Cost, err = strconv.ParseFloat(strings.TrimPrefix(v, "$"), 64)
		default:
			return b, fmt.Errorf("--budget %q: want tokens=N,cost=USD (either, or none)", s)
		}
		if err != nil {
			return b, fmt.Errorf("--budget %s: %q is not a number", k, v)
		}
	}
	return b, nil
}

func printMade(w io.Writer, k access.KeyInfo) {
	fmt.Fprintf(w, "made key %s (%s): sees %s sessions%s\n", k.Name, k.ID, map[string]string{"own": "its own", "all": "all"}[k.Sessions], budgetWords(k.Budget))
	fmt.Fprintf(w, "token (shown once, keep it secret; send it as Authorization: Bearer <token>):\n%s\n", k.Token)
}

func budgetWords(b core.Budget) string {
	var caps []string
	if b.Tokens > 0 {
		caps = append(caps, fmt.Sprintf("%d tokens", b.Tokens))
	}
	if b.Cost > 0 {
		caps = append(caps, fmt.Sprintf("$%g", b.Cost))
	}
	if len(caps) == 0 {
		return ""
	}
	return ", budget " + strings.Join(caps, " and ")
}

func printKeys(w io.Writer, list []access.KeyInfo) error {
	if len(list) == 0 {
		fmt.Fprintln(w, "no keys: agentd key create --name NAME makes one")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSESSIONS\tBUDGET\tSPENT\tCREATED\tREVOKED")
	for _, k := range list {
		caps := strings.TrimPrefix(budgetWords(k.Budget), ", budget ")
		if caps == "" {
			caps = "-"
		}
		spent, revoked := "-", "-"
		if s := k.Budget.Spent; s != nil {
			spent = fmt.Sprintf("%d tokens, $%.4f", s.Tokens, s.Cost)
		}
		if k.Time.Revoked > 0 {
			revoked = time.UnixMilli(k.Time.Revoked).Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Sessions, caps, spent,
			time.UnixMilli(k.Time.Created).Format(time.DateTime), revoked)
	}
	return tw.Flush()
}

// apiKeys works through the server's API.
type apiKeys struct{ c *client.Client }

func (a apiKeys) create(ctx context.Context, s access.Spec) (access.KeyInfo, error) {
	sessions := "own"
	if s.All {
		sessions = "all"
	}
	b := s.Budget
	return a.c.CreateKey(ctx, s.Name, sessions, &b)
}

func (a apiKeys) list(ctx context.Context) ([]access.KeyInfo, error) { return a.c.Keys(ctx) }

func (a apiKeys) revoke(ctx context.Context, id string) (access.KeyInfo, error) {
	return a.c.RevokeKey(ctx, id)
}

func (a apiKeys) budget(ctx context.Context, id string, b core.Budget) (access.KeyInfo, error) {
	return a.c.SetKeyBudget(ctx, id, &b)
}

// dbKeys works on the database.
type dbKeys struct{ k *access.Keys }

func (d dbKeys) create(ctx context.Context, s access.Spec) (access.KeyInfo, error) {
	k, token, err := d.k.Create(ctx, s)
	info := access.Info(k)
	info.Token = token
	return info, err
}

func (d dbKeys) list(ctx context.Context) ([]access.KeyInfo, error) {
	list, err := d.k.List(ctx)
	out := make([]access.KeyInfo, len(list))
	for i, k := range list {
		out[i] = access.Info(k)
	}
	return out, err
}

func (d dbKeys) revoke(ctx context.Context, id string) (access.KeyInfo, error) {
	k, err := d.k.Revoke(ctx, id)
	return access.Info(k), noKey(err, id)
}

func (d dbKeys) budget(ctx context.Context, id string, b core.Budget) (access.KeyInfo, error) {
	k, err := d.k.SetBudget(ctx, id, b)
	return access.Info(k), noKey(err, id)
}

func noKey(err error, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no key %q (revoked keys are named by id)", id)
	}
	return err
}
