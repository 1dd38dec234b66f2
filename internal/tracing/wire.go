package tracing

import (
	"encoding/binary"
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// This file encodes OTLP's TracesData in protobuf's wire format by hand.
// The generated OTLP types would bring google.golang.org/protobuf, whose
// packages (with the OTLP descriptors) run their initialisation at every
// start of every agentd command, tracing on or off; the few messages a
// span export needs take less code than that costs. Field numbers are
// opentelemetry-proto's (trace/v1/trace.proto, common/v1/common.proto).

// pb is a protobuf message being encoded. Scalars at their zero value are
// left out, as proto3 does; a oneof member and a present sub-message are
// written even when empty.
type pb []byte

const (
	wireVarint = 0
	wireI64    = 1
	wireLen    = 2
	wireI32    = 5
)

func (b pb) tag(field, wire int) pb { return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire)) }

func (b pb) uvarint(field int, v uint64) pb {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(b.tag(field, wireVarint), v)
}

func (b pb) fixed64(field int, v uint64) pb {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint64(b.tag(field, wireI64), v)
}

func (b pb) fixed32(field int, v uint32) pb {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint32(b.tag(field, wireI32), v)
}

func (b pb) str(field int, s string) pb {
	if s == "" {
		return b
	}
	return append(binary.AppendUvarint(b.tag(field, wireLen), uint64(len(s))), s...)
}

func (b pb) bytes(field int, p []byte) pb {
	if len(p) == 0 {
		return b
	}
	return append(binary.AppendUvarint(b.tag(field, wireLen), uint64(len(p))), p...)
}

// msg writes a present sub-message, empty or not.
func (b pb) msg(field int, m pb) pb {
	return append(binary.AppendUvarint(b.tag(field, wireLen), uint64(len(m))), m...)
}

// encodeTraces is the TracesData of spans, grouped by resource and
// instrumentation scope in the order they first appear.
func encodeTraces(spans []sdktrace.ReadOnlySpan) []byte {
	type scope struct {
		name, version, schema string
		spans                 []pb
	}
	type resource struct {
		res    []attribute.KeyValue
		schema string
		scopes []*scope
		byKey  map[string]*scope
	}
	var order []*resource
	byKey := map[string]*resource{}
	// The spans of one provider share its resource: encoding its
	// attributes into the grouping key once per resource, not per span,
	// is most of what grouping costs. Equal resources behind other
	// pointers still meet under their key.
	byRes := map[*sdkresource.Resource]*resource{}
	for _, s := range spans {
		res := s.Resource()
		r := byRes[res]
		if r == nil {
			rk := res.Encoded(attribute.DefaultEncoder())
			if r = byKey[rk]; r == nil {
				r = &resource{res: res.Attributes(), schema: res.SchemaURL(), byKey: map[string]*scope{}}
				byKey[rk] = r
				order = append(order, r)
			}
			byRes[res] = r
		}
		is := s.InstrumentationScope()
		sk := is.Name + "\x00" + is.Version
		sc := r.byKey[sk]
		if sc == nil {
			sc = &scope{name: is.Name, version: is.Version, schema: is.SchemaURL}
			r.byKey[sk] = sc
			r.scopes = append(r.scopes, sc)
		}
		sc.spans = append(sc.spans, encodeSpan(s))
	}
	var out pb
	for _, r := range order {
		var rs pb
		rs = rs.msg(1, keyValues(nil, 1, r.res)) // Resource.attributes
		for _, sc := range r.scopes {
			ss := pb(nil).msg(1, pb(nil).str(1, sc.name).str(2, sc.version))
			for _, sp := range sc.spans {
				ss = ss.msg(2, sp)
			}
			rs = rs.msg(2, ss.str(3, sc.schema))
		}
		out = out.msg(1, rs.str(3, r.schema))
	}
	return out
}

// encodeSpan is one Span message.
func encodeSpan(s sdktrace.ReadOnlySpan) pb {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	kind := s.SpanKind()
	if kind == trace.SpanKindUnspecified {
		kind = trace.SpanKindInternal
	}
	b := pb(nil).bytes(1, tid[:]).bytes(2, sid[:]).str(3, sc.TraceState().String())
	if parent := s.Parent(); parent.IsValid() {
		id := parent.SpanID()
		b = b.bytes(4, id[:])
	}
	b = b.str(5, s.Name()).uvarint(6, uint64(kind)).
		fixed64(7, uint64(s.StartTime().UnixNano())).fixed64(8, uint64(s.EndTime().UnixNano()))
	b = keyValues(b, 9, s.Attributes()).uvarint(10, uint64(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		e := pb(nil).fixed64(1, uint64(ev.Time.UnixNano())).str(2, ev.Name)
		b = b.msg(11, keyValues(e, 3, ev.Attributes).uvarint(4, uint64(ev.DroppedAttributeCount)))
	}
	b = b.uvarint(12, uint64(s.DroppedEvents()))
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		m := pb(nil).bytes(1, ltid[:]).bytes(2, lsid[:]).str(3, l.SpanContext.TraceState().String())
		m = keyValues(m, 4, l.Attributes).uvarint(5, uint64(l.DroppedAttributeCount)).fixed32(6, uint32(l.SpanContext.TraceFlags()))
		b = b.msg(13, m)
	}
	b = b.uvarint(14, uint64(s.DroppedLinks()))
	// Status codes: OTLP's are 1 for ok and 2 for error.
	switch st := s.Status(); st.Code {
	case codes.Error:
		b = b.msg(15, pb(nil).str(2, st.Description).uvarint(3, 2))
	case codes.Ok:
		b = b.msg(15, pb(nil).uvarint(3, 1))
	}
	return b.fixed32(16, uint32(sc.TraceFlags()))
}

// keyValues appends kvs to b as repeated KeyValue messages in field.
func keyValues(b pb, field int, kvs []attribute.KeyValue) pb {
	for _, kv := range kvs {
		b = b.msg(field, pb(nil).str(1, string(kv.Key)).msg(2, anyValue(kv.Value)))
	}
	return b
}

// anyValue is an AnyValue message; its oneof member is written even at
// its zero value.
func anyValue(v attribute.Value) pb {
	var b pb
	switch v.Type() {
	case attribute.BOOL:
		n := uint64(0)
		if v.AsBool() {
			n = 1
		}
		return binary.AppendUvarint(b.tag(2, wireVarint), n)
	case attribute.INT64:
		return binary.AppendUvarint(b.tag(3, wireVarint), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return binary.LittleEndian.AppendUint64(b.tag(4, wireI64), math.Float64bits(v.AsFloat64()))
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), attribute.StringValue)
	}
	s := v.String()
	return append(binary.AppendUvarint(b.tag(1, wireLen), uint64(len(s))), s...)
}

// array is an AnyValue holding an ArrayValue of xs.
func array[T any](xs []T, value func(T) attribute.Value) pb {
	var arr pb
	for _, x := range xs {
		arr = arr.msg(1, anyValue(value(x)))
	}
	return pb(nil).msg(5, arr)
}
