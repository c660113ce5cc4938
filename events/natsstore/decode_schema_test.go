package natsstore

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/artifactr/artifactr/events/eventspb"
)

// flatKind returns the fast path's kind of field fd, or fNone when the fast
// path cannot read it (a repeated, nested, zigzag or fixed-width field).
func flatKind(fd protoreflect.FieldDescriptor) byte {
	if fd.Cardinality() == protoreflect.Repeated {
		return fNone
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		return fString
	case protoreflect.Uint64Kind, protoreflect.Int64Kind, protoreflect.BoolKind:
		return fVarint
	}
	return fNone
}

// flatKinds returns the kinds of md's fields 1..3 as the fast path would
// read them, or false when it cannot read md at all. Fields past 3 are
// allowed: an event that sets one goes to events.Decode (checkBuild checks
// that the fast path declines it).
func flatKinds(md protoreflect.MessageDescriptor) ([3]byte, bool) {
	var k [3]byte
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		n := fd.Number()
		if n > 3 {
			continue
		}
		if n < 1 || flatKind(fd) == fNone {
			return k, false
		}
		k[n-1] = flatKind(fd)
	}
	return k, true
}

// The fast decoder's table is a copy of events.proto: each body the
// descriptor has that the fast path can read must be in bodies with the
// schema's field kinds, and no other; the head fields must be the ones
// unmarshalEvent reads. A field added to, or removed from, the schema or
// the table fails here, not silently in production (where a body the
// table misreads would decode wrong, and one it lacks decodes slowly).
func TestBodies_matchDescriptor(t *testing.T) {
	checkBodies(t, (&eventspb.Event{}).ProtoReflect().Descriptor(), &bodies)
}

// reporter is what the check reports to: a *testing.T, or a recorder to
// check the check.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// recorder is a reporter that notes whether anything failed.
type recorder struct{ failed bool }

func (*recorder) Helper()                 {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }

func checkBodies(t reporter, ev protoreflect.MessageDescriptor, table *[maxField + 1]bodySpec) {
	t.Helper()
	head := map[protoreflect.FieldNumber]protoreflect.Kind{
		1: protoreflect.StringKind, 2: protoreflect.MessageKind, 3: protoreflect.Uint64Kind, 4: protoreflect.StringKind,
	}
	inSchema := map[protoreflect.FieldNumber]bool{}
	fields := ev.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		n := fd.Number()
		inSchema[n] = true
		if fd.ContainingOneof() == nil {
			if k, ok := head[n]; !ok || fd.Kind() != k {
				t.Errorf("Event field %d %s (%s) is not a head field unmarshalEvent reads", n, fd.Name(), fd.Kind())
			}
			continue
		}
		if n > maxField {
			t.Errorf("body %s is field %d, past maxField %d: raise maxField", fd.Name(), n, maxField)
			continue
		}
		want, flat := flatKinds(fd.Message())
		got := table[n]
		switch {
		case !flat && got.build != nil:
			t.Errorf("body %d %s is in bodies, but the fast path cannot read it: remove it", n, fd.Name())
		case flat && got.build == nil:
			t.Errorf("body %d %s is not in bodies: add it with kinds %v", n, fd.Name(), want)
		case flat && got.kinds != want:
			t.Errorf("body %d %s: bodies has kinds %v, the schema %v", n, fd.Name(), got.kinds, want)
		case flat:
			checkBuild(t, fd)
		}
	}
	for n := range table {
		if table[n].build != nil && !inSchema[protoreflect.FieldNumber(n)] {
			t.Errorf("bodies has field %d, which is not a body of the schema", n)
		}
	}
}

// checkBuild decodes an event of body fd with every field set to a value of
// its own, and checks that the fast path decodes it, to the same event.
func checkBuild(t reporter, fd protoreflect.FieldDescriptor) {
	t.Helper()
	ev := &eventspb.Event{Thread: "T", ClaimSeq: 7, Holder: "h"}
	m := ev.ProtoReflect()
	b := m.NewField(fd).Message()
	fields := fd.Message().Fields()
	var extra []protoreflect.FieldDescriptor
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.Number() > 3 {
			extra = append(extra, f)
			continue
		}
		switch f.Kind() {
		case protoreflect.StringKind:
			b.Set(f, protoreflect.ValueOfString(fmt.Sprintf("%s-%d", f.Name(), f.Number())))
		case protoreflect.Uint64Kind:
			b.Set(f, protoreflect.ValueOfUint64(uint64(100+f.Number())))
		case protoreflect.Int64Kind:
			b.Set(f, protoreflect.ValueOfInt64(int64(200+f.Number())))
		case protoreflect.BoolKind:
			b.Set(f, protoreflect.ValueOfBool(true))
		}
	}
	m.Set(fd, protoreflect.ValueOfMessage(b))
	data, err := proto.Marshal(ev)
	if err != nil {
		t.Errorf("body %s: %v", fd.Name(), err)
		return
	}
	got, ok := unmarshalEvent(data)
	if !ok || !proto.Equal(got, ev) {
		t.Errorf("body %s: the fast path decodes %v (ok %v), want %v", fd.Name(), got, ok, ev)
	}
	// A field the table does not read must send the event to the slow path,
	// never be dropped.
	for _, f := range extra {
		if f.Kind() != protoreflect.StringKind {
			t.Errorf("body %s: field %d %s past 3 is not a string; teach checkBuild to set it", fd.Name(), f.Number(), f.Name())
			continue
		}
		x := proto.Clone(ev).(*eventspb.Event)
		xb := x.ProtoReflect().Get(fd).Message()
		xb.Set(f, protoreflect.ValueOfString("x"))
		data, err := proto.Marshal(x)
		if err != nil {
			t.Errorf("body %s: %v", fd.Name(), err)
			continue
		}
		if got, ok := unmarshalEvent(data); ok {
			t.Errorf("body %s: the fast path decodes an event with field %d %s set, dropping it: %v", fd.Name(), f.Number(), f.Name(), got)
		}
	}
}

// The check fails when the table and the schema differ: a field dropped,
// a kind changed, a body missing or one too many.
func TestBodies_matchDescriptor_failsOnDrift(t *testing.T) {
	ev := (&eventspb.Event{}).ProtoReflect().Descriptor()
	drift := map[string]func(*[maxField + 1]bodySpec){
		"fieldRemoved": func(b *[maxField + 1]bodySpec) { b[16].kinds[2] = fNone },
		"kindChanged":  func(b *[maxField + 1]bodySpec) { b[13].kinds[1] = fString },
		"bodyMissing":  func(b *[maxField + 1]bodySpec) { b[14] = bodySpec{} },
		"bodyExtra":    func(b *[maxField + 1]bodySpec) { b[30] = b[14] },
	}
	for name, change := range drift {
		t.Run(name, func(t *testing.T) {
			table := bodies
			change(&table)
			rec := &recorder{}
			checkBodies(rec, ev, &table)
			if !rec.failed {
				t.Errorf("a table with %s passes the check", name)
			}
		})
	}
}
