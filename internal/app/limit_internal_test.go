package app

import "testing"

func TestConnLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		requested int
		nofile    uint64
		want      int
	}{
		{0, 256, 224},
		{300, 256, 224},
		{100, 256, 100},
		{0, 1 << 20, 65536},
		{0, 65536, 64512},
		{0, 0, 896},
		{0, 20, 16},
	} {
		if got := connLimit(c.requested, c.nofile); got != c.want {
			t.Errorf("connLimit(%d, %d) = %d, want %d", c.requested, c.nofile, got, c.want)
		}
	}
}
