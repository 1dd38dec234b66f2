package opencode_test

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
)

// readmeTables reads the route tables of the API reference's section on
// opencode's routes (docs/api.md): the operations (`METHOD /path`) of each
// table, by its heading.
func readmeTables(t *testing.T) map[string][]string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	op := regexp.MustCompile("`(GET|POST|PUT|PATCH|DELETE) (/[^`]*)`")
	tables := map[string][]string{}
	heading := ""
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			heading = h
			continue
		}
		if strings.HasPrefix(line, "## ") {
			heading = ""
		}
		if heading == "" || !strings.HasPrefix(line, "| `") {
			continue
		}
		// Only the first column names routes.
		first := strings.SplitN(strings.TrimPrefix(line, "|"), "|", 2)[0]
		for _, m := range op.FindAllStringSubmatch(first, -1) {
			tables[heading] = append(tables[heading], m[1]+" "+m[2])
		}
	}
	return tables
}

// TestREADMERoutes keeps README's tables of opencode's routes true: every
// operation of opencode's document is in exactly one table; those in
// "Served" and "Served differently" are agentd's routes, and every
// opencode route agentd serves is there; those in "Not served" (none
// today) answer 404 (405 where agentd serves the path for another method).
func TestREADMERoutes(t *testing.T) {
	tables := readmeTables(t)
	served := append(append([]string{}, tables["Served"]...), tables["Served differently"]...)
	notServed := tables["Not served (404)"]
	if len(served) == 0 {
		t.Fatalf("README's route tables not found: %v", tables)
	}
	seen := map[string]int{}
	for _, op := range append(append([]string{}, served...), notServed...) {
		seen[op]++
	}
	var all []string
	for p, item := range doc.paths {
		for m := range item {
			if m == "parameters" {
				continue
			}
			op := strings.ToUpper(m) + " " + p
			all = append(all, op)
			switch seen[op] {
			case 0:
				t.Errorf("%s is in opencode's document but in none of README's tables", op)
			case 1:
			default:
				t.Errorf("%s is in README's tables %d times", op, seen[op])
			}
		}
	}
	sort.Strings(all)
	for op := range seen {
		if op != "GET /doc" && !slices.Contains(all, op) {
			t.Errorf("README names %s, which opencode's document does not have", op)
		}
	}

	// What agentd serves on opencode's paths, in opencode's templates.
	n := startNode(t, "")
	var ours struct {
		Paths map[string]map[string]struct {
			Tags []string `json:"tags"`
		} `json:"paths"`
	}
	n.call(t, "GET", "/doc", nil, &ours)
	serves := map[string]bool{}
	for p, item := range ours.Paths {
		for m, op := range item {
			if !slices.Contains(op.Tags, "opencode") && !slices.Contains(op.Tags, "opencode v2") {
				continue
			}
			path := strings.NewReplacer("{id}", "ses_x", "{messageID}", "msg_x", "{requestID}", "per_x",
				"{permissionID}", "per_x", "{projectID}", "global").Replace(p)
			if tmpl, ok := doc.route(strings.ToUpper(m), path); ok {
				serves[strings.ToUpper(m)+" "+tmpl] = true
			} else if p == "/doc" {
				serves["GET /doc"] = true
			}
		}
	}
	for op := range serves {
		if !slices.Contains(served, op) {
			t.Errorf("agentd serves %s, but README's tables do not say so", op)
		}
	}
	for _, op := range served {
		if !serves[op] {
			t.Errorf("README says %s is served, but agentd has no such route", op)
		}
	}
	for _, op := range notServed {
		method, path, _ := strings.Cut(op, " ")
		path = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(strings.TrimSuffix(path, "*"), "x")
		// 405 where agentd serves another method of the path.
		if code := n.call(t, method, path, nil, nil); code != 404 && code != 405 {
			t.Errorf("README says %s is not served, but it answers %d", op, code)
		}
	}
}
