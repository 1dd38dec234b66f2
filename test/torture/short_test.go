package torture_test

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// TestMain skips these end-to-end tests (real binaries) under -short.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("end-to-end: skipped under -short")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
