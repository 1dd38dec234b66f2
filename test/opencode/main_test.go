// Package opencode_test runs opencode's own clients and schemas against
// agentd: the OpenAPI document of the pinned opencode release (read from
// the installed binary at test time) judges every body and event agentd
// sends on opencode's routes; `opencode run --attach` and the TUI
// (`opencode attach`, under tmux) are driven against a live agentd.
//
// The opencode binary comes from test/compat's lock file (npm ci there),
// or from AGENTD_OPENCODE. Without it the tests skip, unless
// AGENTD_OPENCODE_REQUIRED is set (as .ci/run does).
package opencode_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentd/agentd/internal/testenv"
)

var (
	// opencodeBin is the opencode executable ("" when none was found).
	opencodeBin string
	// doc is opencode's OpenAPI document, as served by opencode itself.
	doc *openAPI
)

func TestMain(m *testing.M) {
	if flag.Parse(); testing.Short() {
		testenv.MainSkippingShort(m)
	}
	code, err := setup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "opencode tests:", err)
		os.Exit(1)
	}
	if code >= 0 {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// setup finds opencode and reads its document. It returns an exit code
// when the tests must not run (-1 to run them).
func setup() (int, error) {
	opencodeBin = findOpencode()
	if opencodeBin == "" {
		if os.Getenv("AGENTD_OPENCODE_REQUIRED") != "" {
			return 0, fmt.Errorf("no opencode binary: run npm ci in test/compat or set AGENTD_OPENCODE")
		}
		fmt.Println("skipping: no opencode binary (npm ci in test/compat, or set AGENTD_OPENCODE)")
		testenv.Announce()
		return 0, nil
	}
	raw, err := fetchDoc(opencodeBin)
	if err != nil {
		return 0, fmt.Errorf("read opencode's OpenAPI document: %w", err)
	}
	// opencode 2's later schema, where agentd serves it (v2overlay_test.go).
	if raw, err = overlayV2(raw); err != nil {
		return 0, err
	}
	if doc, err = newOpenAPI(raw); err != nil {
		return 0, err
	}
	return -1, nil
}

func findOpencode() string { return testenv.OpencodeBinary() }

// opencodeEnv is the environment of an opencode process: a private home
// and XDG directories under dir, and everything that would reach the
// network switched off.
func opencodeEnv(dir string) []string {
	env := []string{
		"HOME=" + filepath.Join(dir, "home"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"XDG_DATA_HOME=" + filepath.Join(dir, "data"),
		"XDG_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"XDG_STATE_HOME=" + filepath.Join(dir, "state"),
		"PATH=" + os.Getenv("PATH"),
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
		"OPENCODE_DISABLE_SHARE=1",
		"OPENCODE_DISABLE_CLAUDE_CODE=1",
		"OPENCODE_DISABLE_TERMINAL_TITLE=1",
	}
	for _, d := range []string{"home", "config", "data", "cache", "state"} {
		_ = os.MkdirAll(filepath.Join(dir, d), 0o700)
	}
	return env
}

var listening = regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)

// fetchDoc starts opencode's own server offline and reads /doc.
func fetchDoc(bin string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "agentd-opencode-doc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--port", "0", "--hostname", "127.0.0.1")
	cmd.Env = opencodeEnv(dir)
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				url <- m[1]
			}
		}
		close(url)
	}()
	var base string
	select {
	case u, ok := <-url:
		if !ok {
			return nil, fmt.Errorf("opencode serve exited: %s", stderr.String())
		}
		base = u
	case <-ctx.Done():
		return nil, fmt.Errorf("opencode serve did not start: %s", stderr.String())
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/doc", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET /doc: %s", resp.Status)
	}
	return b, nil
}

// openAPI is opencode's document with its schemas compiled on demand.
type openAPI struct {
	paths    map[string]map[string]json.RawMessage
	routes   []docRoute
	compiler *jsonschema.Compiler
	cache    map[string]*jsonschema.Schema
	// eventTypes maps each event type of the Event union to its schema;
	// v2Types those of opencode 2's V2Event union, and durableTypes the
	// types of its SessionDurableEvent union.
	eventTypes, v2Types map[string]string
	durableTypes        map[string]bool
}

type docRoute struct {
	template string
	re       *regexp.Regexp
	params   int
}

const docURL = "opencode-openapi.json"

func newOpenAPI(raw []byte) (*openAPI, error) {
	var d struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("decode document: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(docURL, inst); err != nil {
		return nil, err
	}
	o := &openAPI{paths: d.Paths, compiler: c, cache: map[string]*jsonschema.Schema{}, eventTypes: map[string]string{},
		v2Types: map[string]string{}, durableTypes: map[string]bool{}}
	for tmpl := range d.Paths {
		pat := regexp.QuoteMeta(tmpl)
		params := strings.Count(tmpl, "{")
		pat = regexp.MustCompile(`\\\{[^}]*\\\}`).ReplaceAllString(pat, `[^/]+`)
		pat = strings.ReplaceAll(pat, `/\*`, `/.*`)
		o.routes = append(o.routes, docRoute{template: tmpl, re: regexp.MustCompile("^" + pat + "$"), params: params})
	}
	for union, into := range map[string]map[string]string{"Event": o.eventTypes, "V2Event": o.v2Types} {
		if err := unionTypes(d.Components.Schemas, union, into); err != nil {
			return nil, err
		}
	}
	durable := map[string]string{}
	if err := unionTypes(d.Components.Schemas, "SessionDurableEvent", durable); err != nil {
		return nil, err
	}
	for typ := range durable {
		o.durableTypes[typ] = true
	}
	return o, nil
}

// unionTypes maps each event type of an event union (anyOf or oneOf of
// $refs) to its schema's name.
func unionTypes(schemas map[string]json.RawMessage, name string, into map[string]string) error {
	var union struct {
		AnyOf []struct {
			Ref string `json:"$ref"`
		} `json:"anyOf"`
		OneOf []struct {
			Ref string `json:"$ref"`
		} `json:"oneOf"`
	}
	if err := json.Unmarshal(schemas[name], &union); err != nil {
		return fmt.Errorf("%s union: %w", name, err)
	}
	for _, r := range append(union.AnyOf, union.OneOf...) {
		ref := strings.TrimPrefix(r.Ref, "#/components/schemas/")
		var ev struct {
			Properties struct {
				Type struct {
					Enum []string `json:"enum"`
				} `json:"type"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(schemas[ref], &ev); err != nil || len(ev.Properties.Type.Enum) != 1 {
			return fmt.Errorf("event schema %s has no single type", ref)
		}
		into[ev.Properties.Type.Enum[0]] = ref
	}
	return nil
}

// route returns the document's path template matching a request path (the
// most literal one when several match).
func (o *openAPI) route(method, path string) (string, bool) {
	best, bestParams := "", 1<<30
	for _, r := range o.routes {
		if _, ok := o.paths[r.template][strings.ToLower(method)]; !ok {
			continue
		}
		if r.re.MatchString(path) && r.params < bestParams {
			best, bestParams = r.template, r.params
		}
	}
	return best, best != ""
}

// pointer escapes one JSON pointer token.
func pointer(tok string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
}

// schema compiles the schema at a JSON pointer of the document.
func (o *openAPI) schema(ptr string) (*jsonschema.Schema, error) {
	if s, ok := o.cache[ptr]; ok {
		return s, nil
	}
	frag := strings.NewReplacer("{", "%7B", "}", "%7D").Replace(ptr)
	s, err := o.compiler.Compile(docURL + "#" + frag)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", ptr, err)
	}
	o.cache[ptr] = s
	return s, nil
}

// responseSchema returns the schema of a route's JSON answer with the given
// status, or nil when the document defines none.
func (o *openAPI) responseSchema(template, method string, status int) (*jsonschema.Schema, error) {
	var op struct {
		Responses map[string]struct {
			Content map[string]json.RawMessage `json:"content"`
		} `json:"responses"`
	}
	if err := json.Unmarshal(o.paths[template][strings.ToLower(method)], &op); err != nil {
		return nil, err
	}
	code := fmt.Sprint(status)
	r, ok := op.Responses[code]
	if !ok {
		return nil, nil
	}
	if _, ok := r.Content["application/json"]; !ok {
		return nil, nil
	}
	return o.schema("/paths/" + pointer(template) + "/" + strings.ToLower(method) + "/responses/" + code + "/content/application~1json/schema")
}

// binary reports whether a route's answer with the given status is
// bytes (application/octet-stream) in the document.
func (o *openAPI) binary(template, method string, status int) bool {
	var op struct {
		Responses map[string]struct {
			Content map[string]json.RawMessage `json:"content"`
		} `json:"responses"`
	}
	if json.Unmarshal(o.paths[template][strings.ToLower(method)], &op) != nil {
		return false
	}
	_, ok := op.Responses[fmt.Sprint(status)].Content["application/octet-stream"]
	return ok
}

// validate checks a JSON value against a schema and returns a readable
// error.
func validate(s *jsonschema.Schema, body []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := s.Validate(inst); err != nil {
		return err
	}
	return nil
}
