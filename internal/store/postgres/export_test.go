package postgres

// SetBeforeCommit sets the hook run between each transaction's last
// statement and its commit; tests set it before opening any store.
func SetBeforeCommit(fn func()) { beforeCommit = fn }

// Migrate applies the migration files of an fs.FS, for tests that bring
// their own.
var Migrate = migrate
