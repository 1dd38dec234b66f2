package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Runtime are the packages every plugin folder gets besides the plugins:
// Bun (its binary comes in the package), and the opencode plugin package
// and SDK of the version whose API agentd speaks (the plugins' client and
// their tools' argument schemas).
var Runtime = []string{"bun@1.4.5", "@opencode-ai/plugin@1.18.33", "@opencode-ai/sdk@1.18.33"}

// Install installs npm specs (and Runtime) into the plugin folder's
// node_modules with npm, writing its output to out. It is the only step
// that needs the package registry; the server only imports what is there.
func Install(ctx context.Context, dir string, specs []string, out io.Writer) error {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return errors.New("installing plugins needs npm (Node.js) on PATH")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	pkg := filepath.Join(dir, "package.json")
	if _, err := os.Stat(pkg); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(pkg, []byte("{\n  \"private\": true,\n  \"description\": \"agentd's plugin folder\"\n}\n"), 0o600); err != nil {
			return err
		}
	}
	args := append([]string{"install", "--no-audit", "--no-fund", "--save"}, Runtime...)
	cmd := exec.CommandContext(ctx, npm, append(args, specs...)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install: %w", err)
	}
	return nil
}

// Installed is a package of the plugin folder: its version, "" when it is
// not installed.
func Installed(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(name), "package.json"))
	if err != nil {
		return ""
	}
	var p struct{ Version string }
	if json.Unmarshal(b, &p) != nil || p.Version == "" {
		return "?"
	}
	return p.Version
}

// IsFile reports whether a spec's path names a file rather than a package.
func (s Spec) IsFile() bool { return strings.HasPrefix(s.Path, "/") }
