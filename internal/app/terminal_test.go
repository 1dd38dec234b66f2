package app_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentd/agentd/internal/app"
)

// TestTerminalsOnlyFromTheOperator: terminals are off unless the
// operator's files turn them on; the project's agentd.json (which the
// model can write) cannot, and is said to be ignored; the keys are read
// strictly.
func TestTerminalsOnlyFromTheOperator(t *testing.T) {
	t.Parallel()
	cfg, _, err := app.Configure(app.Setup{Workspace: t.TempDir()}, app.Config{})
	if err != nil || cfg.Terminals.Enabled {
		t.Fatalf("terminals with no configuration: %+v %v", cfg.Terminals, err)
	}
	ws, global := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "agentd.json"), []byte(`{"agentd":{"terminal":{"enabled":true}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, loaded, err := app.Configure(app.Setup{Workspace: ws, GlobalDir: global}, app.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Terminals.Enabled {
		t.Error("the project's agentd.json turned terminals on")
	}
	warned := false
	for _, w := range loaded.Warnings {
		warned = warned || w.Key == "agentd.terminal" && w.File == filepath.Join(ws, "agentd.json")
	}
	if !warned {
		t.Errorf("the project's terminal block was ignored silently: %+v", loaded.Warnings)
	}
	if err := os.WriteFile(filepath.Join(global, "agentd.json"), []byte(`{"agentd":{"terminal":{"enabled":true,"shell":"/bin/sh","max":4}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err = app.Configure(app.Setup{Workspace: ws, GlobalDir: global}, app.Config{})
	if err != nil || cfg.Terminals != (app.Terminals{Enabled: true, Shell: "/bin/sh", Max: 4}) {
		t.Errorf("the operator's terminals: %+v %v", cfg.Terminals, err)
	}
	for _, bad := range []string{`{"agentd":{"terminal":{"enable":true}}}`, `{"agentd":{"terminal":{"enabled":true,"max":-1}}}`,
		`{"agentd":{"terminal":{"shell":"bash"}}}`, `{"agentd":{"terminal":true}}`} {
		if _, _, err := app.Configure(app.Setup{Workspace: t.TempDir(), ConfigFile: writeConfig(t, bad)}, app.Config{}); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
