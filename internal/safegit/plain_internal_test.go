package safegit

import (
	"regexp"
	"strings"
	"testing"
)

// TestPlainValue pins that the loop accepts exactly what the pattern it
// replaced accepted.
func TestPlainValue(t *testing.T) {
	t.Parallel()
	pattern := regexp.MustCompile(`^[A-Za-z0-9._-]{0,64}$`)
	for _, v := range []string{"", "true", "input", "sha256", "a.b_c-D9", strings.Repeat("x", 64), strings.Repeat("x", 65),
		"has space", "semi;colon", "slash/path", "é", "tab\t", "new\nline", "$(cmd)", "~", "\x00"} {
		if got, want := plainValue(v), pattern.MatchString(v); got != want {
			t.Errorf("plainValue(%q) = %v, the pattern says %v", v, got, want)
		}
	}
}
