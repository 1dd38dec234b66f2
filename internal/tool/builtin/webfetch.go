package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"golang.org/x/net/html"

	"github.com/agentd/agentd/internal/netguard"
	"github.com/agentd/agentd/internal/tool"
)

// WebFetch fetches a URL for the model. Addresses on this machine, on
// private networks and link-local ones are refused unless Allow holds
// them: the check is made on the address each connection is about to
// use, after DNS and on every redirect, so neither a name that resolves
// to 127.0.0.1 nor a redirect there gets through.
type WebFetch struct {
	// Allow lists the otherwise refused networks the operator opened.
	Allow []netip.Prefix
}

// Name implements tool.Tool.
func (WebFetch) Name() string { return "webfetch" }

// ReadOnly says webfetch changes no file.
func (WebFetch) ReadOnly() bool { return true }

// Description implements tool.Tool.
func (WebFetch) Description() string { return describe("webfetch") }

// Schema implements tool.Tool.
func (WebFetch) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"},` +
		`"format":{"type":"string","enum":["markdown","text","html"]},"timeout":{"type":"number"}},"required":["url"]}`)
}

// Needs implements tool.Permissioned: the webfetch permission, matched
// against the URL.
func (WebFetch) Needs(call tool.Call) []tool.Need {
	var in struct {
		URL string `json:"url"`
	}
	if json.Unmarshal(call.Input, &in) != nil || in.URL == "" {
		return nil
	}
	return []tool.Need{{Permission: "webfetch", Patterns: []string{in.URL}, Always: []string{in.URL}, Title: "Fetch " + in.URL}}
}

const (
	maxFetchBytes   = 5 << 20
	defaultFetchFor = 30 * time.Second
	maxFetchFor     = 120 * time.Second
	maxRedirects    = 10
)

// Run implements tool.Tool.
func (w WebFetch) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	var in struct {
		URL     string  `json:"url"`
		Format  string  `json:"format"`
		Timeout float64 `json:"timeout"`
	}
	if r := decode(call.Input, &in); r != nil {
		return *r, nil
	}
	u, err := url.Parse(in.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return tool.Errorf(fmt.Sprintf("url %q: want an http:// or https:// address", in.URL)), nil
	}
	switch in.Format {
	case "":
		in.Format = "markdown"
	case "markdown", "text", "html":
	default:
		return tool.Errorf(fmt.Sprintf("format %q: want markdown, text or html", in.Format)), nil
	}
	wait := defaultFetchFor
	if in.Timeout > 0 {
		wait = min(time.Duration(in.Timeout*float64(time.Second)), maxFetchFor)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return tool.Errorf(fmt.Sprintf("url %q: %v", in.URL, err)), nil
	}
	accept := "text/markdown;q=1.0, text/plain;q=0.9, text/html;q=0.8, */*;q=0.1"
	if in.Format == "html" {
		accept = "text/html;q=1.0, */*;q=0.1"
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "agentd-webfetch")
	resp, err := w.client().Do(req)
	if err != nil {
		switch {
		case errors.Is(err, netguard.ErrRefused):
			return tool.Errorf(fmt.Sprintf("fetch %s: %v", in.URL, netguard.AsRefusal(err))), nil
		case ctx.Err() != nil && context.Cause(ctx) == context.DeadlineExceeded:
			return tool.Errorf(fmt.Sprintf("fetch %s: no answer within %s", in.URL, wait)), nil
		}
		return tool.Errorf(fmt.Sprintf("fetch %s: %v", in.URL, err)), nil
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return tool.Errorf(fmt.Sprintf("fetch %s: %s", in.URL, resp.Status)), nil
	}
	if resp.ContentLength > maxFetchBytes {
		return tool.Errorf(fmt.Sprintf("fetch %s: %d bytes, more than the %d allowed", in.URL, resp.ContentLength, maxFetchBytes)), nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFetchBytes+1))
	if err != nil {
		return tool.Errorf(fmt.Sprintf("fetch %s: %v", in.URL, err)), nil
	}
	if len(body) > maxFetchBytes {
		return tool.Errorf(fmt.Sprintf("fetch %s: more than the %d bytes allowed", in.URL, maxFetchBytes)), nil
	}
	ctype := resp.Header.Get("Content-Type")
	media, _, _ := mime.ParseMediaType(ctype)
	out := string(body)
	if media == "text/html" || media == "application/xhtml+xml" {
		switch in.Format {
		case "markdown":
			if out, err = htmltomarkdown.ConvertString(out); err != nil {
				return tool.Errorf(fmt.Sprintf("convert %s to markdown: %v", in.URL, err)), nil
			}
		case "text":
			if out, err = htmlText(string(body)); err != nil {
				return tool.Errorf(fmt.Sprintf("read the text of %s: %v", in.URL, err)), nil
			}
		}
	}
	return tool.Result{Output: out, Title: fmt.Sprintf("%s (%s)", in.URL, ctype),
		Metadata: map[string]any{"url": in.URL, "status": resp.StatusCode, "contentType": ctype, "bytes": len(body)}}, nil
}

// client builds the HTTP client whose every connection is checked.
func (w WebFetch) client() *http.Client {
	d := netguard.Guard{Allow: w.Allow, Key: "agentd.webfetch.allow"}.Dialer(10 * time.Second)
	return &http.Client{
		// No proxy from the environment: the address checked must be the
		// one connected to.
		Transport: &http.Transport{DialContext: d.DialContext, TLSHandshakeTimeout: 10 * time.Second,
			ResponseHeaderTimeout: maxFetchFor, MaxIdleConns: 4, IdleConnTimeout: 30 * time.Second},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to %s: not http", req.URL)
			}
			return nil
		},
	}
}

// htmlText returns the text a reader sees: script, style and the like
// left out, blocks on lines of their own.
func htmlText(doc string) (string, error) {
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "style", "noscript", "template", "iframe", "object", "embed", "head":
				return
			case "p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "section", "article", "header", "footer":
				b.WriteByte('\n')
			}
		}
		if n.Type == html.TextNode {
			if t := strings.TrimSpace(n.Data); t != "" {
				b.WriteString(t)
				b.WriteByte(' ')
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	lines := strings.Split(b.String(), "\n")
	out := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n"), nil
}
