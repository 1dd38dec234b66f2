package sqlite

// Migrate applies the migration files of an fs.FS, for tests that bring
// their own.
var Migrate = migrate

// WriterSynchronous reads the writer connection's synchronous setting
// (0 OFF, 1 NORMAL, 2 FULL).
func WriterSynchronous(s *Store) (int, error) {
	var v int
	err := s.w.QueryRow("PRAGMA synchronous").Scan(&v)
	return v, err
}
