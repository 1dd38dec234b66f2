// Package testbin builds the module's commands for tests that run them as
// real processes (agentd itself, the test MCP server): once per test
// process and package, into a temporary directory.
package testbin

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	built = map[string]*build{}
)

type build struct {
	once sync.Once
	bin  string
	err  error
	out  []byte
}

// Build returns the path of the binary of the package pkg (an import
// path, e.g. "github.com/agentd/agentd/cmd/agentd"), building it on the
// first call. A failed build fails the test.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	mu.Lock()
	b := built[pkg]
	if b == nil {
		b = &build{}
		built[pkg] = b
	}
	mu.Unlock()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "agentd-testbin-")
		if err != nil {
			b.err = err
			return
		}
		b.bin = filepath.Join(dir, path.Base(pkg))
		b.out, b.err = exec.Command("go", "build", "-o", b.bin, pkg).CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, b.err, b.out)
	}
	return b.bin
}

// Agentd is the agentd command's binary.
func Agentd(t testing.TB) string { return Build(t, "github.com/agentd/agentd/cmd/agentd") }

// MCPServer is the test MCP server's binary (internal/mcp/testserver).
func MCPServer(t testing.TB) string {
	return Build(t, "github.com/agentd/agentd/internal/mcp/testserver")
}
