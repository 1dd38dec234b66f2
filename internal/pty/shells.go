package pty

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// Shell is a shell of this machine (opencode's pty.shells item):
// acceptable ones can run a terminal (not nologin, false and the like).
type Shell struct {
	Path       string `json:"path"`
	Name       string `json:"name"`
	Acceptable bool   `json:"acceptable"`
}

// shellsFile lists the machine's login shells.
var shellsFile = "/etc/shells"

// Shells implements Service: the executables /etc/shells names (or, with
// no such file, the usual ones), in its order.
func (m *Manager) Shells() []Shell {
	var paths []string
	if f, err := os.Open(shellsFile); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line != "" && !strings.HasPrefix(line, "#") && filepath.IsAbs(line) {
				paths = append(paths, line)
			}
		}
		f.Close()
	}
	if len(paths) == 0 {
		paths = []string{"/bin/sh", "/bin/bash", "/usr/bin/bash", "/bin/zsh", "/usr/bin/zsh", "/usr/bin/fish"}
	}
	out := []Shell{}
	seen := map[string]bool{}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 || seen[p] {
			continue
		}
		seen[p] = true
		name := filepath.Base(p)
		out = append(out, Shell{Path: p, Name: name, Acceptable: name != "nologin" && name != "false"})
	}
	return out
}
