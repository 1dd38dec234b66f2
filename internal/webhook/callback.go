package webhook

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/store"
)

// maxURLLen bounds a webhook URL.
const maxURLLen = 2048

// CheckURL refuses a URL deliveries could never reach: not http or https,
// no host, too long, or an address the operator's rules refuse (a name
// is checked when each connection is made, since what it resolves to
// may change). field names it in the message; the error is an
// *engine.InputError (a 400 in both APIs).
func (s *Service) CheckURL(field, raw string) error {
	bad := func(why string) error { return &engine.InputError{Msg: fmt.Sprintf("%s %q: %s", field, raw, why)} }
	if len(raw) > maxURLLen {
		return &engine.InputError{Msg: fmt.Sprintf("%s: %d bytes, over the limit of %d", field, len(raw), maxURLLen)}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("want an http:// or https:// URL")
	}
	if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if err := s.guard.CheckAddr(ip); err != nil {
			return bad(err.Error())
		}
	}
	return nil
}

// Register records a prompt's callbackUrl, before the prompt is
// admitted, so that it is durable before the run can end: the run that
// answers the message is reported to the URL (run.ended). ErrOff (as an
// input error) while webhooks are off; store.ErrNotFound when the session
// does not exist.
func (s *Service) Register(ctx context.Context, sessionID, messageID, rawURL string) error {
	if !s.Enabled() {
		return &engine.InputError{Msg: "callbackUrl: " + ErrOff.Error()}
	}
	if err := s.CheckURL("callbackUrl", rawURL); err != nil {
		return err
	}
	return s.st.Tx(ctx, func(tx store.Tx) error {
		return tx.(store.WebhookTx).PutCallback(ctx, store.Callback{SessionID: sessionID, MessageID: messageID, URL: rawURL,
			Created: time.Now().UnixMilli()})
	})
}

// Forget removes a callback whose prompt was refused.
func (s *Service) Forget(ctx context.Context, sessionID, messageID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := s.st.Tx(ctx, func(tx store.Tx) error {
		return tx.(store.WebhookTx).DeleteCallback(ctx, sessionID, messageID)
	})
	if err != nil {
		s.lg.Warn("forget the callback of a refused prompt", "session", sessionID, "message", messageID, "err", err)
	}
}
