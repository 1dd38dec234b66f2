package schedule

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustTime(t *testing.T, loc *time.Location, s string) time.Time {
	t.Helper()
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCronNext pins the next tick of expressions of every kind: steps,
// ranges, lists, names, macros, the two day fields (either matches when
// both are restricted) and leap days.
func TestCronNext(t *testing.T) {
	t.Parallel()
	cases := []struct{ expr, from, want string }{
		{"*/15 * * * *", "2026-01-01 10:07", "2026-01-01 10:15"},
		{"*/15 * * * *", "2026-01-01 10:45", "2026-01-01 11:00"},
		{"* * * * *", "2026-01-01 10:07", "2026-01-01 10:08"},
		{"5 * * * *", "2026-01-01 10:05", "2026-01-01 11:05"},
		{"0 9 * * 1-5", "2026-01-02 10:00", "2026-01-05 09:00"}, // Friday after nine: Monday
		{"0 9 * * mon-fri", "2026-01-03 08:00", "2026-01-05 09:00"},
		{"0 0 1 1 *", "2026-01-01 00:00", "2027-01-01 00:00"},
		{"@hourly", "2026-01-01 10:59", "2026-01-01 11:00"},
		{"@daily", "2026-01-01 10:59", "2026-01-02 00:00"},
		{"@weekly", "2026-01-01 10:59", "2026-01-04 00:00"},
		{"@monthly", "2026-01-31 10:59", "2026-02-01 00:00"},
		{"@yearly", "2026-06-01 00:00", "2027-01-01 00:00"},
		{"0 0 29 2 *", "2026-03-01 00:00", "2028-02-29 00:00"},
		{"0 12 13 * 5", "2026-01-01 00:00", "2026-01-02 12:00"}, // Friday, or the 13th
		{"0 12 13 * 5", "2026-01-09 13:00", "2026-01-13 12:00"},
		{"0 0 * * 7", "2026-01-01 00:00", "2026-01-04 00:00"}, // 7 is Sunday
		{"0 0 * * 0", "2026-01-01 00:00", "2026-01-04 00:00"},
		{"10-20/5 3 * * *", "2026-01-01 03:12", "2026-01-01 03:15"},
		{"10-20/5 3 * * *", "2026-01-01 03:20", "2026-01-02 03:10"},
		{"50/5 * * * *", "2026-01-01 03:56", "2026-01-01 04:50"},
		{"1,31 0 * jan,dec *", "2026-01-01 00:01", "2026-01-01 00:31"},
		{"0 0 31 * *", "2026-04-01 00:00", "2026-05-31 00:00"},
		{"0 0 1 */3 *", "2026-02-01 00:00", "2026-04-01 00:00"},
	}
	for _, c := range cases {
		cr, err := ParseCron(c.expr)
		if err != nil {
			t.Errorf("%q: %v", c.expr, err)
			continue
		}
		got := cr.Next(mustTime(t, time.UTC, c.from))
		if want := mustTime(t, time.UTC, c.want); !got.Equal(want) {
			t.Errorf("%q after %s: %s, want %s", c.expr, c.from, got.Format("2006-01-02 15:04 Mon"), c.want)
		}
	}
}

// TestCronDaylightSaving: a wall-clock time a jump forward skips is not
// fired that day; the expression is read in the schedule's zone.
func TestCronDaylightSaving(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	cr, _ := ParseCron("30 2 * * *")
	// 2026-03-08: clocks jump from 02:00 to 03:00.
	got := cr.Next(mustTime(t, ny, "2026-03-07 03:00"))
	if want := mustTime(t, ny, "2026-03-09 02:30"); !got.Equal(want) {
		t.Errorf("next 02:30 over the jump: %s, want %s", got, want)
	}
	cr, _ = ParseCron("0 9 * * *")
	got = cr.Next(mustTime(t, ny, "2026-03-08 08:00"))
	if got.Hour() != 9 || got.UTC().Hour() != 13 {
		t.Errorf("09:00 in New York after the jump: %s (UTC %s)", got, got.UTC())
	}
}

// TestCronRefused: malformed expressions, values out of range and
// expressions that can never fire are refused with the field named.
func TestCronRefused(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":                  "5 fields",
		"* * * *":           "5 fields",
		"* * * * * *":       "5 fields",
		"60 * * * *":        "minute",
		"* 24 * * *":        "hour",
		"* * 0 * *":         "day of month",
		"* * * 13 *":        "month",
		"* * * * 8":         "day of week",
		"5-1 * * * *":       "backwards",
		"*/0 * * * *":       "step",
		"*/x * * * *":       "step",
		"1,,2 * * * *":      "not a value",
		"a * * * *":         "not a value",
		"+5 * * * *":        "not a value",
		"-5 * * * *":        "not a value",
		"0 0 30 2 *":        "never fires",
		"0 0 31 4,6,9,11 *": "never fires",
		"@reboot":           "unknown macro",
		"1-2-3 * * * *":     "not a value",
	}
	for expr, want := range cases {
		if _, err := ParseCron(expr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error about %q", expr, err, want)
		}
	}
	if _, err := ParseCron(strings.Repeat("1,", 200) + "1 * * * *"); err == nil {
		t.Error("an over-long expression was accepted")
	}
}

// FuzzParseCron: no input panics the parser, and every expression it
// accepts has a next tick after any time, on a minute, that the
// expression matches.
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/5 1-3 1,15 jan-mar mon", "@hourly", "0 0 29 2 *", "59 23 31 12 7", "1-59/7 */5 ? * sun,sat"} {
		f.Add(s, int64(1767225600000))
	}
	f.Fuzz(func(t *testing.T, expr string, ms int64) {
		c, err := ParseCron(expr)
		if err != nil {
			return
		}
		from := time.UnixMilli(ms % (1 << 42)).UTC()
		next := c.Next(from)
		if next.IsZero() {
			t.Fatalf("%q accepted but never fires after %s", expr, from)
		}
		if !next.After(from) || next.Second() != 0 || next.Nanosecond() != 0 {
			t.Fatalf("%q after %s: %s", expr, from, next)
		}
		if !has(c.minute, next.Minute()) || !has(c.hour, next.Hour()) || !has(c.month, int(next.Month())) || !c.dayMatches(next) {
			t.Fatalf("%q after %s: %s does not match", expr, from, next)
		}
	})
}

// BenchmarkCronNext measures the next tick of a common expression and of
// one whose next tick is years away (29 February on a Monday or the 13th).
func BenchmarkCronNext(b *testing.B) {
	from := time.Date(2026, 3, 1, 10, 7, 0, 0, time.UTC)
	for _, expr := range []string{"*/15 9-17 * * 1-5", "0 0 29 2 *"} {
		c, err := ParseCron(expr)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(expr, func(b *testing.B) {
			for b.Loop() {
				c.Next(from)
			}
		})
	}
}
