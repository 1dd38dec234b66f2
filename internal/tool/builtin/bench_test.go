package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/tool"
)

// BenchmarkReadFewLinesOfBigFile reads 5 lines from the middle of a 50 MB
// file: the memory it takes (B/op) must not depend on the file's size.
func BenchmarkReadFewLinesOfBigFile(b *testing.B) {
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	line := strings.Repeat("x", 99) + "\n"
	f, err := os.Create(filepath.Join(ws, "big.txt"))
	if err != nil {
		b.Fatal(err)
	}
	chunk := strings.Repeat(line, 10_000)
	for range 50 {
		f.WriteString(chunk)
	}
	f.Close()
	in, _ := json.Marshal(map[string]any{"filePath": "big.txt", "offset": 250_000, "limit": 5})
	b.ReportAllocs()
	for b.Loop() {
		res, err := Read{}.Run(context.Background(), tool.Call{Directory: ws, Input: in})
		if err != nil || res.IsError {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// BenchmarkBashNeeds is the cost of judging a typical agent command before
// it runs: parse, expansions, and a path check of every argument.
func BenchmarkBashNeeds(b *testing.B) {
	ws := b.TempDir()
	for _, cmd := range []string{
		"go test ./...",
		`cd sub && for f in *.go; do gofmt -l "$f"; done | head -20 > out.txt; git status --short && echo "done $(date)"`,
	} {
		in, _ := json.Marshal(map[string]string{"command": cmd})
		call := tool.Call{Directory: ws, Input: in}
		b.Run(strconv.Itoa(len(cmd)), func(b *testing.B) {
			for b.Loop() {
				Bash{}.Needs(call)
			}
		})
	}
}
