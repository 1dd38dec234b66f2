package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/netguard"
	"github.com/agentd/agentd/internal/store"
)

// pruneEvery is how often a node deletes the deliveries that ended
// longer ago than Keep.
const pruneEvery = 10 * time.Minute

// dispatchLoop claims due deliveries while workers are free and sends
// each in a goroutine of its own. It claims (a write) only when a read
// says a delivery is due, so that an idle node, or a wake-up with nothing
// to take, costs a read.
func (s *Service) dispatchLoop() {
	defer s.wg.Done()
	free := make(chan struct{}, s.cfg.Workers)
	for range s.cfg.Workers {
		free <- struct{}{}
	}
	lastPrune := time.Time{}
	for {
		if time.Since(lastPrune) > pruneEvery {
			s.prune()
			lastPrune = time.Now()
		}
		wait := s.cfg.Poll // with every worker busy, the first to finish pokes
		if n := len(free); n > 0 {
			if wait = s.nextWait(); wait == 0 {
				claimed := s.claimUpTo(n)
				for _, d := range claimed {
					<-free
					s.wg.Go(func() {
						s.deliver(d)
						free <- struct{}{}
						s.poke()
					})
				}
				if len(claimed) == n {
					continue // more may be due
				}
				wait = min(s.nextWait(), s.cfg.Poll)
				if wait == 0 {
					// Due but not claimable: held by a lease that has just
					// expired, or behind one this node is sending.
					wait = s.cfg.Poll
				}
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-s.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// claimUpTo claims up to n due deliveries for this node.
func (s *Service) claimUpTo(n int) []store.Delivery {
	var got []store.Delivery
	err := s.st.Tx(s.ctx, func(tx store.Tx) (err error) {
		got, err = tx.(store.WebhookTx).ClaimDeliveries(s.ctx, s.cfg.Node, s.cfg.Timeout+5*time.Second, n)
		return err
	})
	if err != nil {
		if s.ctx.Err() == nil {
			s.lg.Warn("claim webhook deliveries", "err", err)
		}
		return nil
	}
	return got
}

// nextWait is how long until a delivery is due (0: one is), at most Poll.
func (s *Service) nextWait() time.Duration {
	wait, ok, err := s.rd.NextDelivery(s.ctx)
	if err != nil || !ok {
		return s.cfg.Poll
	}
	return min(max(wait, 0), s.cfg.Poll)
}

// prune deletes the deliveries that ended more than Keep ago.
func (s *Service) prune() {
	cutoff := time.Now().Add(-s.cfg.Keep).UnixMilli()
	err := s.st.Tx(s.ctx, func(tx store.Tx) error {
		_, err := tx.(store.WebhookTx).PruneDeliveries(s.ctx, cutoff)
		return err
	})
	if err != nil && s.ctx.Err() == nil {
		s.lg.Warn("prune webhook deliveries", "err", err)
	}
}

// deliver makes one attempt at a claimed delivery and records it. An
// attempt cut by Stop is not recorded: the lease is released and the
// delivery is sent again.
func (s *Service) deliver(d store.Delivery) {
	status, err := s.send(d)
	if s.ctx.Err() != nil {
		return
	}
	a := store.Attempt{ID: d.ID, Owner: s.cfg.Node, Attempt: d.Attempts, Status: status}
	switch {
	case err == nil:
		a.OK = true
	case errors.Is(err, netguard.ErrRefused) || errors.Is(err, errBadURL):
		a.Final, a.Error = true, err.Error()
	default:
		a.Error = err.Error()
		a.Retry = s.backoff(d.Attempts, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 10*time.Second)
	defer cancel()
	var state string
	werr := s.st.Tx(ctx, func(tx store.Tx) (err error) {
		state, err = tx.(store.WebhookTx).EndAttempt(ctx, a)
		return err
	})
	switch {
	case werr != nil:
		// The lease runs out and the delivery is sent again.
		s.lg.Warn("record a webhook attempt", "delivery", d.ID, "err", werr)
	case state == "":
		s.lg.Info("webhook delivery taken over by another node during its attempt", "delivery", d.ID)
	case state == store.DeliveryDelivered:
		s.cfg.Metrics.Sent(time.Since(time.UnixMilli(eventTime(d))))
	case state == store.DeliveryFailed:
		s.cfg.Metrics.Failed()
		s.lg.Warn("webhook delivery failed for good", "delivery", d.ID, "url", redact(d.URL), "attempts", d.Attempts, "err", a.Error)
	default:
		s.cfg.Metrics.Retried()
		s.lg.Info("webhook attempt failed; retrying", "delivery", d.ID, "url", redact(d.URL), "attempt", d.Attempts,
			"retry_in", a.Retry, "err", a.Error)
	}
}

// eventTime reads the event's time from a delivery's body, for the
// latency metric (0 when it cannot).
func eventTime(d store.Delivery) int64 {
	i := bytes.Index(d.Body, []byte(`"time":`))
	if i < 0 {
		return time.Now().UnixMilli()
	}
	rest := d.Body[i+len(`"time":`):]
	j := bytes.IndexAny(rest, ",}")
	if j < 0 {
		return time.Now().UnixMilli()
	}
	n, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	if err != nil {
		return time.Now().UnixMilli()
	}
	return n
}

// backoff is the wait after the n-th failed attempt: Backoff doubled n-1
// times, at most MaxBackoff, the upper half of it drawn at random (so that
// receivers that came back are not hit by every sender at once); longer
// when the receiver asked for it (Retry-After).
func (s *Service) backoff(n int, err error) time.Duration {
	d := s.cfg.Backoff
	for i := 1; i < n && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.cfg.MaxBackoff)
	d = d/2 + rand.N(d/2+1)
	var ra *retryAfter
	if errors.As(err, &ra) && ra.d > d {
		d = min(ra.d, s.cfg.MaxBackoff)
	}
	return d
}

// errBadURL marks a URL that can never be delivered to.
var errBadURL = errors.New("bad webhook url")

// retryAfter is a receiver's refusal that says when to come back.
type retryAfter struct {
	status string
	d      time.Duration
}

func (e *retryAfter) Error() string {
	return fmt.Sprintf("receiver answered %s (Retry-After %s)", e.status, e.d)
}

// send makes one signed attempt and returns the receiver's status.
func (s *Service) send(d store.Delivery) (int, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Body))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errBadURL, err)
	}
	now := time.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentd-webhook/"+s.cfg.Version)
	req.Header.Set(HeaderSignature, Sign(s.cfg.Secret, now, d.Body))
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderDelivery, d.ID)
	req.Header.Set(HeaderEvent, d.Type)
	req.Header.Set(HeaderAttempt, strconv.Itoa(d.Attempts))
	resp, err := s.client.Do(req)
	if err != nil {
		if r := netguard.AsRefusal(err); errors.Is(r, netguard.ErrRefused) {
			return 0, r
		}
		if ctx.Err() != nil && s.ctx.Err() == nil {
			return 0, fmt.Errorf("no answer within %s", s.cfg.Timeout)
		}
		return 0, err
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.StatusCode, nil
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return resp.StatusCode, fmt.Errorf("receiver answered %s; redirects are not followed (Location: %s)", resp.Status, resp.Header.Get("Location"))
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		return resp.StatusCode, &retryAfter{status: resp.Status, d: time.Duration(secs) * time.Second}
	}
	msg := strings.TrimSpace(strings.ToValidUTF8(string(head), "?"))
	if msg != "" {
		msg = ": " + msg
	}
	return resp.StatusCode, fmt.Errorf("receiver answered %s%s", resp.Status, msg)
}

// newClient is the HTTP client of deliveries: every connection through
// the address check, no proxy from the environment (the address checked
// must be the one connected to), no redirects followed.
func (s *Service) newClient() *http.Client {
	d := s.guard.Dialer(10 * time.Second)
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConns: 32, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// redact drops a URL's query and credentials for the log, where tokens
// in them do not belong.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unreadable url)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
