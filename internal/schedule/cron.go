package schedule

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Cron is a parsed five-field cron expression: minute, hour, day of month,
// month and day of week, each a set of allowed values kept as a bit mask.
type Cron struct {
	minute, hour, dom, month, dow uint64
	// domAny and dowAny record a field written as "*" (or "?"): when both
	// day fields are restricted, a day matches if either does, as in
	// Vixie cron; when one is "*", only the other decides.
	domAny, dowAny bool
}

// field is one of the five fields' ranges and names.
type field struct {
	name     string
	min, max int
	names    []string // names[i] is the value min+i (months, days)
}

var (
	fMinute = field{name: "minute", min: 0, max: 59}
	fHour   = field{name: "hour", min: 0, max: 23}
	fDom    = field{name: "day of month", min: 1, max: 31}
	fMonth  = field{name: "month", min: 1, max: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}}
	// Day of week: 0 and 7 are both Sunday.
	fDow = field{name: "day of week", min: 0, max: 7, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}}
)

// macros are the named schedules cron understands.
var macros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// maxCronLen bounds an expression; the longest sensible one is far
// shorter.
const maxCronLen = 256

// ParseCron reads a cron expression: five fields separated by spaces, each
// "*", a value, a range "a-b", any of those with a step "/n", or a list of
// them separated by commas; months and days of week also by their
// three-letter English names. The macros @yearly, @annually, @monthly,
// @weekly, @daily, @midnight and @hourly stand for their usual
// expressions. An expression that can never fire (30 February) is refused.
func ParseCron(expr string) (Cron, error) {
	if len(expr) > maxCronLen {
		return Cron{}, fmt.Errorf("cron: longer than %d bytes", maxCronLen)
	}
	s := strings.TrimSpace(expr)
	if strings.HasPrefix(s, "@") {
		m, ok := macros[strings.ToLower(s)]
		if !ok {
			return Cron{}, fmt.Errorf("cron: unknown macro %q (@yearly, @monthly, @weekly, @daily, @hourly)", s)
		}
		s = m
	}
	parts := strings.Fields(s)
	if len(parts) != 5 {
		return Cron{}, fmt.Errorf("cron: want 5 fields (minute hour day-of-month month day-of-week), got %d", len(parts))
	}
	var c Cron
	var err error
	if c.minute, _, err = parseField(parts[0], fMinute); err != nil {
		return Cron{}, err
	}
	if c.hour, _, err = parseField(parts[1], fHour); err != nil {
		return Cron{}, err
	}
	if c.dom, c.domAny, err = parseField(parts[2], fDom); err != nil {
		return Cron{}, err
	}
	if c.month, _, err = parseField(parts[3], fMonth); err != nil {
		return Cron{}, err
	}
	if c.dow, c.dowAny, err = parseField(parts[4], fDow); err != nil {
		return Cron{}, err
	}
	if c.dow&(1<<7) != 0 {
		c.dow = c.dow&^(1<<7) | 1
	}
	if !c.possible() {
		return Cron{}, fmt.Errorf("cron: %q never fires (no month has that day)", expr)
	}
	return c, nil
}

// daysIn is the most days each month can have.
var daysIn = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// possible reports whether some day of some allowed month matches: only
// a day of month restricted alone (day-of-week "*") can rule every day
// out, as "0 0 30 2 *" does.
func (c Cron) possible() bool {
	if !c.dowAny && !c.domAny {
		return true
	}
	if !c.dowAny {
		return c.dow != 0
	}
	for m := 1; m <= 12; m++ {
		if c.month&(1<<m) != 0 && c.dom&((1<<(daysIn[m]+1))-2) != 0 {
			return true
		}
	}
	return false
}

// parseField reads one field into a bit mask, and reports whether it was
// a bare "*".
func parseField(s string, f field) (uint64, bool, error) {
	if s == "*" || s == "?" {
		return span(f.min, f.max, 1), true, nil
	}
	var mask uint64
	for item := range strings.SplitSeq(s, ",") {
		m, err := parseItem(item, f)
		if err != nil {
			return 0, false, err
		}
		mask |= m
	}
	return mask, false, nil
}

// parseItem reads one element of a list: "*", "a", "a-b", each with an
// optional "/step"; "a/step" runs from a to the field's end.
func parseItem(s string, f field) (uint64, error) {
	rng, stepStr, hasStep := strings.Cut(s, "/")
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepStr)
		if err != nil || n < 1 || n > f.max {
			return 0, fmt.Errorf("cron: %s: bad step %q", f.name, stepStr)
		}
		step = n
	}
	lo, hi := f.min, f.max
	switch a, b, isRange := strings.Cut(rng, "-"); {
	case rng == "*" || rng == "?":
	case isRange:
		var err error
		if lo, err = f.value(a); err != nil {
			return 0, err
		}
		if hi, err = f.value(b); err != nil {
			return 0, err
		}
		if lo > hi {
			return 0, fmt.Errorf("cron: %s: range %q runs backwards", f.name, rng)
		}
	default:
		v, err := f.value(rng)
		if err != nil {
			return 0, err
		}
		lo = v
		if !hasStep {
			hi = v
		}
	}
	return span(lo, hi, step), nil
}

// value reads a number or a name of the field.
func (f field) value(s string) (int, error) {
	for i, n := range f.names {
		if strings.EqualFold(s, n) {
			return f.min + i, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || len(s) > 2 || s[0] == '+' || s[0] == '-' {
		return 0, fmt.Errorf("cron: %s: %q is not a value", f.name, s)
	}
	if v < f.min || v > f.max {
		return 0, fmt.Errorf("cron: %s: %d is out of range %d-%d", f.name, v, f.min, f.max)
	}
	return v, nil
}

func span(lo, hi, step int) uint64 {
	var m uint64
	for v := lo; v <= hi; v += step {
		m |= 1 << v
	}
	return m
}

// has reports whether v is in the mask.
func has(mask uint64, v int) bool { return mask&(1<<v) != 0 }

// dayMatches applies the day-of-month and day-of-week fields to a date.
func (c Cron) dayMatches(t time.Time) bool {
	dom, dow := has(c.dom, t.Day()), has(c.dow, int(t.Weekday()))
	switch {
	case c.domAny && c.dowAny:
		return true
	case c.domAny:
		return dow
	case c.dowAny:
		return dom
	}
	return dom || dow
}

// searchYears bounds Next's search: every expression ParseCron accepts
// fires within a few years (29 February within eight).
const searchYears = 9

// Next returns the first time after t, to the minute, that the
// expression matches in t's location; the zero time when there is none
// within the search bound. Wall-clock times a daylight-saving jump skips
// do not exist and are not fired; a wall-clock time a jump back repeats
// fires at both of its instants.
func (c Cron) Next(t time.Time) time.Time {
	loc := t.Location()
	t = t.Truncate(time.Minute).Add(time.Minute)
	end := t.AddDate(searchYears, 0, 0)
	for t.Before(end) {
		y, mo, d := t.Date()
		var next time.Time
		switch {
		case !has(c.month, int(mo)):
			next = time.Date(y, mo+1, 1, 0, 0, 0, 0, loc)
		case !c.dayMatches(t):
			next = time.Date(y, mo, d+1, 0, 0, 0, 0, loc)
		case !has(c.hour, t.Hour()):
			next = time.Date(y, mo, d, t.Hour()+1, 0, 0, 0, loc)
		case !has(c.minute, t.Minute()):
			next = c.nextMinute(t)
		default:
			return t
		}
		if !next.After(t) {
			// A zone's jump can map a wall-clock time to an instant
			// before t; step past it instead.
			next = t.Add(time.Minute)
		}
		t = next
	}
	return time.Time{}
}

// nextMinute jumps to the next allowed minute of t's hour, or to the next
// hour when none is left.
func (c Cron) nextMinute(t time.Time) time.Time {
	m := t.Minute()
	if rest := c.minute >> (m + 1) << (m + 1); rest != 0 {
		return t.Add(time.Duration(bits.TrailingZeros64(rest)-m) * time.Minute)
	}
	return t.Add(time.Duration(60-m) * time.Minute)
}
