package app

import (
	"slices"
	"testing"

	"github.com/agentd/agentd/internal/credential"
	"github.com/agentd/agentd/internal/snapshot"
)

// TestServerPathsHideSnapshots: the snapshot stores are among the paths
// commands may not read, wherever they are (under the user's data
// directory for PostgreSQL nodes, or agentd.snapshot.dir), not only when
// they happen to lie beside a SQLite database.
func TestServerPathsHideSnapshots(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var cfg Config
	cfg.DBPath = "postgres://127.0.0.1/agentd"
	cfg.Engine.Snapshots = snapshot.New(snapshot.Options{Dir: dir})
	if got := serverPaths(cfg); !slices.Contains(got, dir) {
		t.Errorf("serverPaths = %q, want it to hold the snapshot root %s", got, dir)
	}
}

// TestServerPathsHideCredentials: the credential file is among the paths
// commands may not read, for a SQLite node (beside its database) and a
// PostgreSQL one (in agentd's configuration directory, where it is
// imported into the database and set aside under another name, also
// hidden), and where the configuration names it.
func TestServerPathsHideCredentials(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"/var/lib/agentd/agentd.db", "postgres://127.0.0.1/agentd"} {
		cfg := Config{DBPath: db}
		got := serverPaths(cfg)
		for _, want := range []string{CredentialsFile(db), CredentialsFile(db) + credential.ImportedSuffix} {
			if !slices.Contains(got, want) {
				t.Errorf("%s: serverPaths = %q, want it to hold %s", db, got, want)
			}
		}
	}
	named := Config{DBPath: "postgres://127.0.0.1/agentd", CredentialsFile: "/srv/agentd/keys.json"}
	if got := serverPaths(named); !slices.Contains(got, "/srv/agentd/keys.json.imported") {
		t.Errorf("serverPaths = %q, want it to hold the named file set aside", got)
	}
}
