package metrics

import (
	"bufio"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// This file is the exposition: agentd's own registry of counters, gauges
// and histograms, written in Prometheus's text format (version 0.0.4),
// byte for byte as client_golang writes it: families sorted by name,
// series by their label values, labels by name, histogram buckets
// cumulative with le last. It replaced client_golang, whose packages (and
// procfs, protobuf and expvar with them) ran their initialisation, about
// a tenth of every agentd command's start, to build a default registry
// agentd never used.

// kind is a family's type as the TYPE line names it.
type kind string

const (
	counterKind   kind = "counter"
	gaugeKind     kind = "gauge"
	histogramKind kind = "histogram"
	summaryKind   kind = "summary"
)

// family is one metric name with its series, one per set of label values.
type family struct {
	name, help string
	kind       kind
	labels     []string
	// order is the indexes of labels sorted by name, the order the text
	// format writes and sorts series in.
	order []int
	// buckets are a histogram's upper bounds, ascending, without +Inf.
	buckets []float64

	mu     sync.RWMutex
	series map[string]*series
}

// series is one set of label values' value: a counter's or gauge's in
// bits, or a histogram's bucket counts (the last one +Inf), sum and count.
type series struct {
	values []string
	bits   atomic.Uint64
	counts []atomic.Uint64
	sum    atomic.Uint64
}

func newFamily(name, help string, k kind, buckets []float64, labels ...string) *family {
	return &family{name: name, help: help, kind: k, labels: labels, order: labelOrder(labels), buckets: buckets,
		series: map[string]*series{}}
}

// with returns the series of these label values (in the family's label
// order), creating it at zero.
func (f *family) with(values ...string) *series {
	var buf [256]byte
	key := buf[:0]
	for _, v := range values {
		key = append(key, v...)
		key = append(key, 0xff)
	}
	f.mu.RLock()
	s := f.series[string(key)]
	f.mu.RUnlock()
	if s != nil {
		return s
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s = f.series[string(key)]; s == nil {
		s = &series{values: slices.Clone(values)}
		if f.kind == histogramKind {
			s.counts = make([]atomic.Uint64, len(f.buckets)+1)
		}
		f.series[string(key)] = s
	}
	return s
}

// add adds v to the counter of these label values.
func (f *family) add(v float64, values ...string) { f.with(values...).add(v) }

// observe records v in the histogram of these label values.
func (f *family) observe(v float64, values ...string) { f.with(values...).observe(f.buckets, v) }

// add adds v to a counter or gauge.
func (s *series) add(v float64) { addFloat(&s.bits, v) }

// set sets a gauge.
func (s *series) set(v float64) { s.bits.Store(math.Float64bits(v)) }

// observe records v in a histogram with these buckets.
func (s *series) observe(buckets []float64, v float64) {
	i, _ := slices.BinarySearch(buckets, v)
	s.counts[i].Add(1)
	addFloat(&s.sum, v)
}

func addFloat(bits *atomic.Uint64, v float64) {
	for {
		old := bits.Load()
		if bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// sample is one series as a scrape writes it: its label values in the
// family's label order and its value; a histogram's or summary's points.
type sample struct {
	values []string
	value  float64
	// counts are a histogram's cumulative bucket counts, +Inf last.
	counts []uint64
	// quantiles are a summary's values at its family's quantile bounds.
	quantiles []float64
	sum       float64
	count     uint64
}

// snapshot is a family's state at a scrape.
type snapshot struct {
	f       *family
	samples []sample
}

func (f *family) snapshot() snapshot {
	f.mu.RLock()
	out := make([]sample, 0, len(f.series))
	for _, s := range f.series {
		p := sample{values: s.values, value: math.Float64frombits(s.bits.Load())}
		if f.kind == histogramKind {
			p.counts = make([]uint64, len(s.counts))
			for i := range s.counts {
				p.count += s.counts[i].Load()
				p.counts[i] = p.count
			}
			p.sum = math.Float64frombits(s.sum.Load())
		}
		out = append(out, p)
	}
	f.mu.RUnlock()
	return snapshot{f: f, samples: out}
}

// Collector adds series read at scrape time (from the store, the process)
// to what a scrape writes.
type Collector interface {
	// Collect returns the families read now; one that could not be read
	// is left out, as client_golang's ContinueOnError does.
	Collect() []snapshot
}

// constFamily is a family read at scrape time: its samples are given.
func constFamily(name, help string, k kind, labels []string, samples ...sample) snapshot {
	return snapshot{f: &family{name: name, help: help, kind: k, labels: labels, order: labelOrder(labels)}, samples: samples}
}

// registry holds the node's families and the collectors read at scrape.
type registry struct {
	mu         sync.Mutex
	families   []*family
	collectors []Collector
	// prepare runs once, before the first scrape.
	prepare []func()
	once    sync.Once
}

// beforeGather runs f before the first scrape.
func (r *registry) beforeGather(f func()) {
	r.mu.Lock()
	r.prepare = append(r.prepare, f)
	r.mu.Unlock()
}

func (r *registry) add(fs ...*family) {
	r.mu.Lock()
	r.families = append(r.families, fs...)
	r.mu.Unlock()
}

func (r *registry) addCollector(cs ...Collector) {
	r.mu.Lock()
	r.collectors = append(r.collectors, cs...)
	r.mu.Unlock()
}

// gather reads every family and collector, sorted as client_golang sorts
// them; a family with no series is left out.
func (r *registry) gather() []snapshot {
	r.once.Do(func() {
		r.mu.Lock()
		prepare := r.prepare
		r.mu.Unlock()
		for _, f := range prepare {
			f()
		}
	})
	r.mu.Lock()
	fams, cols := slices.Clone(r.families), slices.Clone(r.collectors)
	r.mu.Unlock()
	out := make([]snapshot, 0, len(fams)+8*len(cols))
	for _, f := range fams {
		out = append(out, f.snapshot())
	}
	for _, c := range cols {
		out = append(out, c.Collect()...)
	}
	out = slices.DeleteFunc(out, func(s snapshot) bool { return len(s.samples) == 0 })
	slices.SortStableFunc(out, func(a, b snapshot) int { return strings.Compare(a.f.name, b.f.name) })
	for _, s := range out {
		s.sortSamples()
	}
	return out
}

// sortSamples orders a family's series by their label values taken in
// the order of the label names.
func (s snapshot) sortSamples() {
	order := s.f.order
	slices.SortFunc(s.samples, func(a, b sample) int {
		for _, i := range order {
			if c := strings.Compare(a.values[i], b.values[i]); c != 0 {
				return c
			}
		}
		return 0
	})
}

// labelOrder is the indexes of labels sorted by name.
func labelOrder(labels []string) []int {
	order := make([]int, len(labels))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	return order
}

// contentType is what client_golang's handler answers a scrape that does
// not ask for protobuf or OpenMetrics.
const contentType = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"

// handler serves the registry in the text format, gzipped when the
// scraper accepts it.
func (r *registry) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Add("Vary", "Accept")
		h.Add("Vary", "Accept-Encoding")
		var out io.Writer = w
		if acceptsGzip(req.Header.Get("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(w)
			defer gz.Close()
			out = gz
		}
		bw := bufio.NewWriterSize(out, 32<<10)
		writeText(bw, r.gather())
		_ = bw.Flush()
	})
}

func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		enc, _, _ := strings.Cut(part, ";")
		if strings.TrimSpace(enc) == "gzip" {
			return true
		}
	}
	return false
}

// writeText writes families in the text format.
func writeText(w *bufio.Writer, fams []snapshot) {
	for _, s := range fams {
		f := s.f
		w.WriteString("# HELP " + f.name + " ")
		writeEscaped(w, f.help, false)
		w.WriteString("\n# TYPE " + f.name + " " + string(f.kind) + "\n")
		order := f.order
		for _, p := range s.samples {
			switch f.kind {
			case histogramKind:
				for i, c := range p.counts {
					le := math.Inf(1)
					if i < len(f.buckets) {
						le = f.buckets[i]
					}
					writeSeries(w, f.name+"_bucket", f.labels, order, p.values, "le", le)
					w.WriteString(strconv.FormatUint(c, 10) + "\n")
				}
				writeSums(w, f, order, p)
			case summaryKind:
				for i, q := range summaryQuantiles {
					writeSeries(w, f.name, f.labels, order, p.values, "quantile", q)
					writeFloat(w, p.quantiles[i])
					w.WriteByte('\n')
				}
				writeSums(w, f, order, p)
			default:
				writeSeries(w, f.name, f.labels, order, p.values, "", 0)
				writeFloat(w, p.value)
				w.WriteByte('\n')
			}
		}
	}
}

// summaryQuantiles are the quantiles a summary's samples carry.
var summaryQuantiles = []float64{0, 0.25, 0.5, 0.75, 1}

func writeSums(w *bufio.Writer, f *family, order []int, p sample) {
	writeSeries(w, f.name+"_sum", f.labels, order, p.values, "", 0)
	writeFloat(w, p.sum)
	w.WriteByte('\n')
	writeSeries(w, f.name+"_count", f.labels, order, p.values, "", 0)
	w.WriteString(strconv.FormatUint(p.count, 10) + "\n")
}

// writeSeries writes a series' name and labels and the space before its
// value; extra (le, quantile) is the last label when named.
func writeSeries(w *bufio.Writer, name string, labels []string, order []int, values []string, extra string, extraValue float64) {
	w.WriteString(name)
	if len(labels) == 0 && extra == "" {
		w.WriteByte(' ')
		return
	}
	sep := byte('{')
	for _, i := range order {
		w.WriteByte(sep)
		sep = ','
		w.WriteString(labels[i] + `="`)
		writeEscaped(w, values[i], true)
		w.WriteByte('"')
	}
	if extra != "" {
		w.WriteByte(sep)
		w.WriteString(extra + `="`)
		writeFloat(w, extraValue)
		w.WriteByte('"')
	}
	w.WriteString("} ")
}

// writeEscaped escapes a backslash and a newline, and a double quote
// inside a label value.
func writeEscaped(w *bufio.Writer, s string, quote bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			w.WriteString(`\\`)
		case c == '\n':
			w.WriteString(`\n`)
		case c == '"' && quote:
			w.WriteString(`\"`)
		default:
			w.WriteByte(c)
		}
	}
}

// writeFloat writes v as client_golang does: Go's shortest form ('g'),
// and +Inf, -Inf and NaN.
func writeFloat(w *bufio.Writer, v float64) {
	switch {
	case math.IsNaN(v):
		w.WriteString("NaN")
	case math.IsInf(v, 1):
		w.WriteString("+Inf")
	case math.IsInf(v, -1):
		w.WriteString("-Inf")
	default:
		var buf [32]byte
		w.Write(strconv.AppendFloat(buf[:0], v, 'g', -1, 64))
	}
}
