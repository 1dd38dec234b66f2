package postgres

// Migrate applies the migration files of an fs.FS, for tests that bring
// their own.
var Migrate = migrate
