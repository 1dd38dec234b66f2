package modelview

import (
	"fmt"
	"testing"
)

// The history cache keeps what fits its byte budget, many small sessions
// or a few large ones, and always the entry just put.
func TestCacheBoundedByBytes(t *testing.T) {
	t.Parallel()
	c := &Cache{entries: map[string]*entry{}}
	small := &entry{size: 4 << 10}
	for i := range 1000 {
		c.put(fmt.Sprint("ses_", i), small)
	}
	if len(c.entries) != 1000 {
		t.Errorf("1,000 sessions of 4 KiB: %d kept", len(c.entries))
	}
	big := &entry{size: cacheBytes - 1<<20}
	c.put("ses_big", big)
	if c.bytes > cacheBytes || c.entries["ses_big"] != big {
		t.Errorf("after a large entry: %d bytes in %d entries, large kept %v", c.bytes, len(c.entries), c.entries["ses_big"] == big)
	}
	c.put("ses_big", small)
	c.Drop("ses_big")
	total := 0
	for _, e := range c.entries {
		total += e.size
	}
	if total != c.bytes {
		t.Errorf("accounted %d bytes, entries hold %d", c.bytes, total)
	}
}
