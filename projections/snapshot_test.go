package projections

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/artifactr/artifactr/internal/eventgen"
)

// Folding a snapshot at any point plus the events after it equals folding
// the whole log, on random logs with and without planted faults.
func TestThread_snapshotRoundTrip(t *testing.T) {
	const seed = 20261130
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	actives := 0
	for round := range 12 {
		l, _ := eventgen.Random(r, eventgen.Config{Threads: 1, Events: 80, Faults: 0.1 * float64(round%3), Chaos: round%3 == 2})
		want := Fold("t0", l.Envs)
		want.next = 0
		for cut := 1; cut <= len(l.Envs); cut++ {
			part := Fold("t0", l.Envs[:cut])
			if part.LastSeq == 0 {
				continue // nothing of t0 to snapshot yet
			}
			if part.ActiveRun != nil {
				actives++
			}
			data, err := part.EncodeSnapshot()
			if err != nil {
				t.Fatalf("round %d cut %d: encode: %v", round, cut, err)
			}
			got, err := DecodeSnapshot("t0", data)
			if err != nil {
				t.Fatalf("round %d cut %d: decode: %v", round, cut, err)
			}
			for _, e := range l.Envs[cut:] {
				got.Apply(e)
			}
			got.next = 0
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d (cut %d of %d): snapshot + tail differs from the whole fold:\n got %+v\nwant %+v", round, cut, len(l.Envs), got, want)
			}
		}
	}
	if actives == 0 {
		t.Fatal("no snapshot was taken with a run active: the test proves little")
	}
}

// A snapshot that does not verify is refused, never trusted.
func TestDecodeSnapshot_bad(t *testing.T) {
	l := eventgen.NewLog()
	p := eventgen.Writer{Thread: "T"}
	l.Post(p.Post("m1", "hello"))
	good, err := Fold("T", l.Envs).EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeSnapshot("T", good); err != nil {
		t.Fatalf("good snapshot: %v", err)
	}
	cases := map[string][]byte{
		"garbage":       []byte("not json"),
		"other thread":  good,
		"edited state":  []byte(strings.Replace(string(good), "hello", "HELLO", 1)),
		"other version": []byte(strings.Replace(string(good), `"v":1`, `"v":9`, 1)),
	}
	for name, data := range cases {
		thread := "T"
		if name == "other thread" {
			thread = "U"
		}
		if _, err := DecodeSnapshot(thread, data); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: got %v, want ErrBadSnapshot", name, err)
		}
	}
}
