package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FromHTTP builds an APIError from a provider's HTTP error answer,
// honouring retry-after-ms and Retry-After (seconds or an HTTP date).
func FromHTTP(status int, msg string, header http.Header, body string, now time.Time) *APIError {
	e := &APIError{Message: msg, StatusCode: status, Retryable: RetryableStatus(status), Body: body,
		Auth: status == http.StatusUnauthorized || status == http.StatusForbidden}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	if header != nil {
		e.Headers = map[string]string{}
		for k := range header {
			e.Headers[strings.ToLower(k)] = header.Get(k)
		}
		e.RetryAfter = RetryAfter(header, now)
		// Anthropic signals overload with 529 and an error type; both are
		// retryable like 5xx.
		if strings.EqualFold(header.Get("x-should-retry"), "true") {
			e.Retryable = true
		}
	}
	if strings.Contains(body, "overloaded") {
		e.Retryable = true
	}
	e.ContextOverflow = IsContextOverflow(status, msg+" "+body)
	return e
}

// overflowSigns are what providers say when a request does not fit the
// context window (OpenAI, Anthropic, and the common local servers).
var overflowSigns = []string{
	"context_length_exceeded", "maximum context length", "prompt is too long",
	"context window", "too many tokens", "exceeds the context", "input is too long",
}

// IsContextOverflow reports whether an error answer says the request did
// not fit the model's context window.
func IsContextOverflow(status int, text string) bool {
	if status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge {
		return false
	}
	t := strings.ToLower(text)
	for _, s := range overflowSigns {
		if strings.Contains(t, s) {
			return true
		}
	}
	return false
}

// RetryAfter reads a provider's requested delay from its headers.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// FromSDK builds an APIError from a provider SDK's error answer: its
// status, message (the error's text, err, when it has none), response
// (nil when there is none) and raw JSON body.
func FromSDK(status int, msg string, err error, resp *http.Response, raw string) *APIError {
	var h http.Header
	if resp != nil {
		h = resp.Header
	}
	if msg == "" {
		msg = err.Error()
	}
	return FromHTTP(status, msg, h, raw, time.Now())
}

// FromTransport classifies an error that happened on the way to the
// provider or while reading its stream.
func FromTransport(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return err
	}
	if e := unreachable(err); e != nil {
		return e
	}
	// Reset connections, timeouts and streams that break or garble are
	// worth another try; the engine decides how a retry after visible
	// output is shown.
	return &APIError{Message: err.Error(), Retryable: true}
}

// RefusedAttempts bounds the tries of a call whose connection is refused:
// a local model server that is starting gets a second and a third chance
// a second apart; one that is not running is said within seconds, not
// retried like a 503 for a minute.
const RefusedAttempts = 3

// unreachable classifies a provider address that no one answers at: a
// host name that does not exist fails at once (another try cannot fix a
// typo in baseURL), a refused connection after RefusedAttempts quick
// tries. The message is one line that names the address and the fix.
func unreachable(err error) *APIError {
	where := "the provider"
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			where = u.Scheme + "://" + u.Host
		}
	}
	var de *net.DNSError
	switch {
	case errors.As(err, &de) && de.IsNotFound:
		return &APIError{Message: fmt.Sprintf("cannot reach %s: no such host %q; check the provider's options.baseURL", where, de.Name)}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &APIError{Message: fmt.Sprintf("cannot reach %s: connection refused; is the model server running? check the provider's options.baseURL", where),
			Retryable: true, RetryAfter: time.Second, MaxAttempts: RefusedAttempts}
	}
	return nil
}
