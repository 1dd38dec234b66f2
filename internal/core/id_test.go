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
