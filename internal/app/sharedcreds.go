package app

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/agentd/agentd/internal/credential"
	"github.com/agentd/agentd/internal/store"
)

// shareCredentials moves the credential store into a database that the
// nodes of a cluster share (PostgreSQL): every node then reads and writes
// the same keys and logins, and hears of the others' changes, so that a
// login made through one node enables its provider on all. The file this
// node kept before, if any, is imported once and set aside
// (credential.ImportedSuffix). A SQLite database keeps the file.
func shareCredentials(ctx context.Context, cfg *Config, db store.Store) error {
	sh, ok := db.(credential.Shared)
	if !ok {
		return nil
	}
	if _, err := cfg.credentialKeys(); err != nil {
		return err
	}
	if cfg.Credentials == nil {
		return nil
	}
	path := cfg.Credentials.Path()
	_, statErr := os.Stat(path)
	err := cfg.Credentials.Share(ctx, sh)
	switch {
	case errors.Is(err, credential.ErrMalformed):
		cfg.Logger.Warn("credentials: some stored entries are unreadable and left out", "err", err)
	case err != nil:
		return fmt.Errorf("credentials: %w", err)
	}
	if statErr == nil && path != "" {
		cfg.Logger.Info("credentials: this node's credential file was imported into the shared database (an entry the database held already was kept unless the file's was newer) and set aside",
			"file", path, "now", path+credential.ImportedSuffix)
	}
	return nil
}
