package torture_test

import (
	"testing"

	"github.com/agentd/agentd/internal/testenv"
)

// TestMain skips these end-to-end tests (real binaries) under -short.
func TestMain(m *testing.M) { testenv.MainSkippingShort(m) }
