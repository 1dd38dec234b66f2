package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of a delivery.
const (
	// HeaderSignature is "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>">" with the operator's secret, as Stripe signs.
	HeaderSignature = "X-Agentd-Signature"
	// HeaderTimestamp repeats t, for receivers that log it.
	HeaderTimestamp = "X-Agentd-Timestamp"
	// HeaderDelivery is the delivery's id, the same on every attempt:
	// receivers dedupe on it (delivery is at least once).
	HeaderDelivery = "X-Agentd-Delivery"
	// HeaderEvent is the webhook event type; HeaderAttempt counts the
	// attempts from 1.
	HeaderEvent   = "X-Agentd-Event"
	HeaderAttempt = "X-Agentd-Attempt"
)

// MinSecretLen is the shortest secret accepted: a signature is only as
// hard to forge as the secret is to guess.
const MinSecretLen = 16

// CheckSecret refuses a secret too short to sign with.
func CheckSecret(secret string) error {
	if strings.TrimSpace(secret) != secret {
		return errors.New("agentd.webhooks.secret: leading or trailing spaces (a file read with {file:} keeps none; check the variable)")
	}
	if len(secret) < MinSecretLen {
		return fmt.Errorf("agentd.webhooks.secret: %d characters, want at least %d (a random string, given as {env:VAR} to keep it out of the file)",
			len(secret), MinSecretLen)
	}
	return nil
}

// Sign returns the signature header's value for body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Verify checks a signature header the way a receiver should: one of its
// v1 values is the body's HMAC under secret, and its t is within
// tolerance of now (a replayed old request is refused).
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs []string
	for _, kv := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return errors.New("signature: want t=<unix seconds>,v1=<hex>")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("signature: timestamp %s is %s away from now", ts, d.Round(time.Second))
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return errors.New("signature: no v1 matches the body")
}
