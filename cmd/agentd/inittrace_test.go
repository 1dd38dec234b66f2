package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/testbin"
)

// initDefault is what a package's initialisation may allocate unless it
// is named in initBudgets: allocations are deterministic where timings
// are not, and a package that allocates much at init also spends the
// time, at every start of every agentd command.
const initDefault = 16 << 10

// initBudgets names the packages allowed more, each with its reason and
// about a quarter above what it allocates today, so that one that grows,
// or a new dependency that is heavy at init, fails here and is looked at.
var initBudgets = map[string]int{
	// The provider SDKs register their union types at init.
	"github.com/openai/openai-go/v3":            190_000,
	"github.com/openai/openai-go/v3/responses":  95_000,
	"github.com/openai/openai-go/v3/live":       60_000,
	"github.com/anthropics/anthropic-sdk-go/v2": 120_000,
	// webfetch's HTML parser (its entity table); the MCP SDK's and
	// structured output's schemas (internal/structout).
	"golang.org/x/net/html":                      160_000,
	"github.com/google/jsonschema-go/jsonschema": 105_000,
	// The MCP SDK's gob registrations; the YAML reader the Anthropic SDK
	// links (and commands and skills share).
	"encoding/gob":            36_000,
	"go.yaml.in/yaml/v4":      33_000,
	"encoding/xml":            24_000,
	"mvdan.cc/sh/v3/fileutil": 20_000,
}

// initOwn is what one of agentd's own packages may allocate at init: its
// tables and patterns are built on first use (the routes' documentation,
// the shell judge's tables), so none is named in initBudgets.
const initOwn = 8 << 10

// initNever are packages that must not be in the binary at all: each is
// heavy at init and agentd does its job without it. OTLP is encoded by
// internal/tracing (no gRPC, no protobuf runtime); /metrics is written by
// internal/metrics (no client_golang, whose registry, process and Go
// collectors, expvar and runtime/metrics ran at every start).
var initNever = []string{
	"google.golang.org/grpc",
	"google.golang.org/protobuf",
	"go.opentelemetry.io/proto/otlp",
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc",
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp",
	"github.com/prometheus/client_golang",
	"github.com/prometheus/procfs",
	"expvar",
	"runtime/metrics",
	"go.yaml.in/yaml/v3",
}

// initTotal bounds the allocations of every init together.
const initTotal = 1_000_000

// TestInitIsCheap runs the real binary with GODEBUG=inittrace=1 and holds
// every package's initialisation to its budget: nothing heavy may run
// before main, since every command (`agentd --version` too) pays for it.
func TestInitIsCheap(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t, "github.com/agentd/agentd/cmd/agentd")
	cmd := exec.Command(bin, "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("agentd --version: %v\n%s", err, stderr.String())
	}
	inits := parseInitTrace(t, stderr.String())
	if len(inits) < 50 {
		t.Fatalf("read %d package inits from GODEBUG=inittrace=1; the trace's format changed?\n%s", len(inits), stderr.String())
	}
	total := 0
	for pkg, bytes := range inits {
		total += bytes
		limit, named := initBudgets[pkg]
		switch {
		case named:
		case strings.HasPrefix(pkg, "github.com/agentd/agentd/"):
			limit = initOwn
		default:
			limit = initDefault
		}
		if bytes > limit {
			t.Errorf("init of %s allocates %d bytes, over its budget of %d: make what it builds lazy (sync.OnceValue), or name it in initBudgets with the reason", pkg, bytes, limit)
		}
		for _, never := range initNever {
			if pkg == never || strings.HasPrefix(pkg, never+"/") {
				t.Errorf("%s is initialised; it must not be in the binary", pkg)
			}
		}
	}
	if total > initTotal {
		t.Errorf("package initialisation allocates %d bytes in all, over %d", total, initTotal)
	}
}

// parseInitTrace reads lines such as
//
//	init github.com/x/y @1.2 ms, 0.3 ms clock, 4096 bytes, 12 allocs
//
// into bytes allocated by package.
func parseInitTrace(t *testing.T, trace string) map[string]int {
	t.Helper()
	out := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(trace))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		n, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", sc.Text(), err)
		}
		out[f[1]] += n
	}
	return out
}
