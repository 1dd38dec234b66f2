package command

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// project makes a project directory with the given command files (in
// .opencode/command); a value "->path" makes a symlink, "|" a FIFO.
func project(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	cmds := filepath.Join(dir, ".opencode", "command")
	if err := os.MkdirAll(cmds, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		p := filepath.Join(cmds, name)
		var err error
		switch {
		case strings.HasPrefix(body, "->"):
			err = os.Symlink(body[2:], p)
		case body == "|":
			err = syscall.Mkfifo(p, 0o644)
		default:
			err = os.WriteFile(p, []byte(body), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestProjectFilesCannotReplace: a project's command file adds a command
// but never replaces a built-in, global or configured one; the project's
// own commands are marked as such.
func TestProjectFilesCannotReplace(t *testing.T) {
	t.Parallel()
	global := t.TempDir()
	os.WriteFile(filepath.Join(global, "mine.md"), []byte("the operator's"), 0o644)
	dir := project(t, map[string]string{"review.md": "---\nagent: ops\n---\npwned", "init.md": "pwned", "mine.md": "pwned",
		"conf.md": "pwned", "extra.md": "the project's"})
	c := &Catalog{Global: []string{global}, Config: Set{"conf": {Name: "conf", Template: "configured"}}}
	set := c.For(dir)
	for name, want := range map[string]string{"mine": "the operator's", "conf": "configured", "extra": "the project's"} {
		if got := set[name]; got.Template != want {
			t.Errorf("%s = %q, want %q", name, got.Template, want)
		}
	}
	for _, name := range []string{"review", "init"} {
		if set[name].Template == "pwned" || set[name].Project || set[name].Agent != "" {
			t.Errorf("the project's %s.md replaced the built-in: %+v", name, set[name])
		}
	}
	if !set["extra"].Project || set["mine"].Project || set["conf"].Project {
		t.Errorf("Project marks: extra %v, mine %v, conf %v", set["extra"].Project, set["mine"].Project, set["conf"].Project)
	}
}

// TestProjectAgents: a project command runs with the agent it names only
// when project commands may use it; the operator's own commands may name
// any.
func TestProjectAgents(t *testing.T) {
	t.Parallel()
	c := &Catalog{}
	for _, tc := range []struct {
		cmd  Command
		want string
		ok   bool
	}{
		{Command{Name: "a", Agent: "plan", Project: true}, "plan", true},
		{Command{Name: "b", Agent: "build", Project: true}, "build", true},
		{Command{Name: "c", Agent: "ops", Project: true}, "", false},
		{Command{Name: "d", Project: true}, "", true},
		{Command{Name: "e", Agent: "ops"}, "ops", true},
	} {
		got, err := c.Agent(tc.cmd)
		if got != tc.want || (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrAgentNotAllowed) {
			t.Errorf("%+v: %q %v", tc.cmd, got, err)
		}
	}
	strict := &Catalog{ProjectAgents: []string{}}
	if _, err := strict.Agent(Command{Name: "a", Agent: "plan", Project: true}); err == nil {
		t.Error("an empty ProjectAgents allowed plan")
	}
	wide := &Catalog{ProjectAgents: []string{"ops"}}
	if got, err := wide.Agent(Command{Name: "a", Agent: "ops", Project: true}); err != nil || got != "ops" {
		t.Errorf("allowed ops: %q %v", got, err)
	}
}

// TestCommandFilesStayInside: a command file that is a symlink leading
// out of the project, or a FIFO, is refused (not followed, not waited
// on); a symlink inside the project is read; other files still load.
func TestCommandFilesStayInside(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "secret.md")
	os.WriteFile(outside, []byte("TOKEN=secret"), 0o644)
	dir := project(t, map[string]string{"leak.md": "->" + outside, "fifo.md": "|", "ok.md": "fine",
		"alias.md": "->ok.md", "abs.md": "->/etc/hostname"})
	done := make(chan struct{})
	var set Set
	var err error
	go func() {
		defer close(done)
		set = Set{}
		err = set.LoadProject(dir)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("loading the command files hung on the FIFO")
	}
	if set["ok"].Template != "fine" || set["alias"].Template != "fine" {
		t.Errorf("the regular files: %+v", set)
	}
	for _, name := range []string{"leak", "fifo", "abs"} {
		if _, ok := set[name]; ok {
			t.Errorf("%s.md was loaded: %+v", name, set[name])
		}
		if err == nil || !strings.Contains(err.Error(), name+".md") {
			t.Errorf("the error does not name %s.md: %v", name, err)
		}
	}
	// A command folder that is itself a link out of the project is not
	// followed either.
	linked := t.TempDir()
	os.MkdirAll(filepath.Join(linked, ".opencode"), 0o755)
	os.Symlink(filepath.Dir(outside), filepath.Join(linked, ".opencode", "command"))
	set = Set{}
	if err := set.LoadProject(linked); err == nil || len(set) != 0 {
		t.Errorf("a linked folder: %v %+v", err, set)
	}
	// Global folders refuse FIFOs too, and big files.
	global := t.TempDir()
	syscall.Mkfifo(filepath.Join(global, "fifo.md"), 0o644)
	os.WriteFile(filepath.Join(global, "big.md"), []byte(strings.Repeat("x", MaxFileBytes+1)), 0o644)
	set = Set{}
	if err := set.LoadDir(global); err == nil || len(set) != 0 {
		t.Errorf("a global FIFO and a big file: %v %+v", err, set)
	}
}
