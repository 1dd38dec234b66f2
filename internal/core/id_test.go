package core

import (
	"sort"
	"strings"
	"testing"
	"time"
)

func TestIDFormatAndOrder(t *testing.T) {
	t.Parallel()
	base := time.Now()
	var g idGenerator
	var asc, desc []string
	for i := range 5000 {
		now := base.Add(time.Duration(i/1000) * time.Millisecond)
		asc = append(asc, g.newAt(PrefixMessage, false, now))
		desc = append(desc, g.newAt(PrefixSession, true, now))
	}
	for _, id := range asc {
		if !ValidID(PrefixMessage, id) {
			t.Fatalf("invalid id %q", id)
		}
	}
	if !sort.StringsAreSorted(asc) {
		t.Error("ascending ids are not sorted in creation order")
	}
	for i := 1; i < len(desc); i++ {
		if desc[i] >= desc[i-1] {
			t.Fatalf("descending ids not newest first at %d: %s >= %s", i, desc[i], desc[i-1])
		}
	}
}

func TestIDClockStepBack(t *testing.T) {
	t.Parallel()
	var g idGenerator
	now := time.Now()
	a := g.newAt(PrefixPart, false, now)
	b := g.newAt(PrefixPart, false, now.Add(-time.Minute))
	if b <= a {
		t.Fatalf("id after clock step back sorts first: %s <= %s", b, a)
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "ses", "msg_0123456789abABCDEFGHIJKLMN", "ses_0123456789ab!BCDEFGHIJKLMN", "ses_../x", "ses_" + strings.Repeat("x", 200)} {
		if ValidID(PrefixSession, s) {
			t.Errorf("ValidID(%q) = true", s)
		}
	}
	// Ids of other layouts that match opencode's patterns are clients'
	// ids like any other.
	for _, s := range []string{"ses_", "ses_zz", "ses_0123456789abcdef01234567", "ses-abc", "ses_01J9.x"} {
		if !ValidID(PrefixSession, s) {
			t.Errorf("ValidID(%q) = false", s)
		}
	}
}

// FuzzValidID: the id check never panics, accepts only the prefix and
// then safe characters (no path separator, no NUL, bounded) and every id
// the server makes.
func FuzzValidID(f *testing.F) {
	for _, s := range []string{"msg_23a7827700011tgBrErr9uKef0", "msg_", "prt_../../etc/passwd", "ses_\x00", "msg_ffffffffffffAAAAAAAAAAAAAA", "msg_23a7827700011tgBrErr9uKef0x", "mßg_23a7827700011tgBrErr9uKe"} {
		f.Add("msg", s)
	}
	f.Fuzz(func(t *testing.T, prefix, s string) {
		ok := ValidID(prefix, s)
		if ok {
			if len(s) > MaxIDLen || !strings.HasPrefix(s, prefix) || len(s) == len(prefix) {
				t.Fatalf("accepted %q for prefix %q", s, prefix)
			}
			for _, c := range s {
				if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-' || c == '.') {
					t.Fatalf("accepted %q with %q", s, c)
				}
			}
		}
		if prefix != "" && len(prefix) < 8 && !ValidID(prefix, NewID(prefix, false)) {
			t.Fatalf("refused a server id with prefix %q", prefix)
		}
	})
}
