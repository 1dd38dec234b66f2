package suggest

import "testing"

func TestNearest(t *testing.T) {
	t.Parallel()
	known := []string{"serve", "run", "sessions", "status", "wait", "abort", "qwen2.5-coder", "local", "anthropic"}
	for word, want := range map[string]string{
		"sevre": "serve", "statsu": "status", "wiat": "wait", "qwen2.5-coderr": "qwen2.5-coder", "lcoal": "local",
		"antropic": "anthropic", "deploy": "", "x": "", "RUN": "run",
	} {
		if got := Nearest(word, known); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", word, got, want)
		}
	}
}

func TestHint(t *testing.T) {
	t.Parallel()
	if h := Hint("lcoal", []string{"local", "openai"}, 0); h != `did you mean "local"? known: local, openai` {
		t.Errorf("Hint = %q", h)
	}
	if h := Hint("zzz", []string{"a", "b", "c"}, 2); h != "known: a, b, … (1 more)" {
		t.Errorf("Hint = %q", h)
	}
}
