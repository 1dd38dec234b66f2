package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/core"
)

// The server's own routes opencode's clients call: a client's log line,
// the configuration (the operator's files, read-only over HTTP), the
// disposal of what is cached, and self-upgrade (which agentd does not do).

// Bounds of POST /log: a client writes into the server's log, so what it
// writes is cut to size and its rate is capped.
const (
	logServiceMax = 64
	logMessageMax = 8 << 10
	logExtraMax   = 4 << 10
	// logRate lines a second, over all clients; more are refused (429).
	logRate = 100
)

// logBody is POST /log.
type logBody struct {
	Service *string        `json:"service"`
	Level   string         `json:"level"`
	Message *string        `json:"message"`
	Extra   map[string]any `json:"extra"`
}

// window counts events in one-second windows: a fixed-window rate cap
// with no goroutine.
type window struct {
	mu    sync.Mutex
	start time.Time
	n     int
}

// allow counts one event now and reports whether it is within max a
// second.
func (w *window) allow(now time.Time, max int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.start) >= time.Second || now.Before(w.start) {
		w.start, w.n = now, 0
	}
	w.n++
	return w.n <= max
}

// clip cuts s to max bytes (on a rune boundary) and says how much was cut.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d bytes cut)", len(s)-cut)
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// clientLog writes a client's line to the server's log, marked as the
// client's, bounded in size and rate.
func (s *Server) clientLog(w http.ResponseWriter, r *http.Request) *apiError {
	var b logBody
	if e := decodeJSON(r, &b, false); e != nil {
		return e
	}
	level, ok := logLevels[b.Level]
	switch {
	case b.Service == nil || b.Message == nil:
		return badRequest("service, level and message are required")
	case !ok:
		return badRequest("level %q: want debug, info, warn or error", b.Level)
	}
	if !s.logWindow.allow(time.Now(), logRate) {
		return &apiError{status: http.StatusTooManyRequests, name: "RateLimitError", retryAfter: 1,
			msg: fmt.Sprintf("clients may write at most %d log lines a second to this server", logRate)}
	}
	attrs := []any{"service", clip(*b.Service, logServiceMax)}
	if len(b.Extra) > 0 {
		extra, err := json.Marshal(b.Extra)
		if err != nil {
			return badRequest("extra: %v", err)
		}
		attrs = append(attrs, "extra", clip(string(extra), logExtraMax))
	}
	s.cfg.Logger.With("component", "client").Log(r.Context(), level, clip(*b.Message, logMessageMax), attrs...)
	writeJSON(w, http.StatusOK, true)
	return nil
}

// patchConfig answers PATCH /config and /global/config. agentd's
// configuration is the operator's files, read at start; a client may not
// change it (it could widen permissions, add providers or commands). A
// patch whose every key already has the value it gives changes nothing
// and is answered with the configuration; any other key is refused with
// 403, named.
func (s *Server) patchConfig(w http.ResponseWriter, r *http.Request) *apiError {
	var patch map[string]json.RawMessage
	if e := decodeJSON(r, &patch, false); e != nil {
		return e
	}
	cur := s.cfg.Catalog.Config
	var changed []string
	for k, v := range patch {
		var want, have any
		if json.Unmarshal(v, &want) != nil {
			return badRequest("%s: not JSON", k)
		}
		if b, err := json.Marshal(cur[k]); err == nil && cur[k] != nil {
			_ = json.Unmarshal(b, &have)
		}
		if !reflect.DeepEqual(want, have) {
			changed = append(changed, k)
		}
	}
	if len(changed) > 0 {
		sort.Strings(changed)
		return &apiError{status: http.StatusForbidden, name: "ConfigReadOnlyError", msg: fmt.Sprintf(
			"agentd's configuration is the operator's files, read when the server starts; clients cannot change it (asked to change: %s). Edit the configuration file and restart the server",
			strings.Join(changed, ", "))}
	}
	return s.getConfig(w, r)
}

// globalDispose drops what is cached for every directory (their command
// files are read again on next use) and announces global.disposed. The
// configuration is the operator's and stays as read at start.
func (s *Server) globalDispose(w http.ResponseWriter, r *http.Request) *apiError {
	s.cfg.Commands.ForgetAll()
	s.hub.PublishLive(core.MustEvent("", "global.disposed", struct{}{}))
	writeJSON(w, http.StatusOK, true)
	return nil
}

type upgradeBody struct {
	Target string `json:"target"`
}

type upgradeJSON struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
}

// upgrade answers opencode's self-upgrade with its own failure shape:
// agentd is installed and upgraded by its operator, never by a client.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) *apiError {
	var b upgradeBody
	if e := decodeJSON(r, &b, true); e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, upgradeJSON{Error: "agentd " + s.cfg.Version +
		" does not upgrade itself: its operator installs new versions (the binary or package) and restarts the server"})
	return nil
}
