package core

import (
	"sort"
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
	for _, s := range []string{"", "ses_", "ses_zz", "msg_0123456789abABCDEFGHIJKLMN", "ses_0123456789ab!BCDEFGHIJKLMN"} {
		if ValidID(PrefixSession, s) {
			t.Errorf("ValidID(%q) = true", s)
		}
	}
}

// FuzzValidID: the id check never panics, accepts exactly the shape the
// server makes (prefix, underscore, 26 base62 characters) and every id the
// server makes.
func FuzzValidID(f *testing.F) {
	for _, s := range []string{"msg_23a7827700011tgBrErr9uKef0", "msg_", "prt_../../etc/passwd", "ses_\x00", "msg_ffffffffffffAAAAAAAAAAAAAA", "msg_23a7827700011tgBrErr9uKef0x", "mßg_23a7827700011tgBrErr9uKe"} {
		f.Add("msg", s)
	}
	f.Fuzz(func(t *testing.T, prefix, s string) {
		ok := ValidID(prefix, s)
		if ok {
			if len(s) != len(prefix)+27 || s[:len(prefix)+1] != prefix+"_" {
				t.Fatalf("accepted %q for prefix %q", s, prefix)
			}
			for _, c := range s[len(prefix)+1:] {
				if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
					t.Fatalf("accepted %q with %q", s, c)
				}
			}
		}
		if prefix != "" && len(prefix) < 8 && !ValidID(prefix, NewID(prefix, false)) {
			t.Fatalf("refused a server id with prefix %q", prefix)
		}
	})
}
