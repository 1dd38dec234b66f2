package sandbox

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNil: a nil Sandbox leaves the command as it was.
func TestNil(t *testing.T) {
	t.Parallel()
	var s *Sandbox
	cmd := exec.Command("true")
	release, err := s.Wrap(cmd, Spec{})
	if err != nil || cmd.Path == "/proc/self/exe" || len(cmd.Args) != 1 {
		t.Errorf("nil sandbox changed the command: %v %q", err, cmd.Args)
	}
	release()
	if s.String() != "off" {
		t.Errorf("String() = %q", s.String())
	}
}

func TestNewModes(t *testing.T) {
	t.Parallel()
	if s, err := New(Config{Mode: ModeOff}); s != nil || err != nil {
		t.Errorf("off: %v, %v", s, err)
	}
	if _, err := New(Config{Mode: "strict"}); err == nil {
		t.Error("an unknown mode was accepted")
	}
	if _, err := New(Config{Writable: []string{"relative/dir"}}); ABI() > 0 && err == nil {
		t.Error("a relative path was accepted")
	}
	s, err := New(Config{Mode: ModeRequired})
	switch {
	case ABI() == 0 && err == nil:
		t.Error("required without Landlock started")
	case ABI() > 0 && (err != nil || !strings.HasPrefix(s.String(), "landlock ABI "+strconv.Itoa(ABI())+", network allowed")):
		t.Errorf("required: %v, %v", s, err)
	}
}
