package natsstore

import (
	"bytes"
	"testing"

	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// A snapshot larger than one value is saved in chunks under a manifest and
// loaded whole; a smaller one saved after it replaces it.
func TestStore_SaveSnapshot_chunked(t *testing.T) {
	s := open(t, natsembedtest.RunForTest(t), func(c *Config) { c.MaxEventBytes = 8 << 10 })
	big := bytes.Repeat([]byte("0123456789abcdef"), 7*(8<<10)/16+5) // 7 chunks and a bit
	if err := s.SaveSnapshot(ctxT(t), "T", big); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadSnapshot(ctxT(t), "T")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("chunked snapshot: %d bytes back, %v; want %d", len(got), err, len(big))
	}
	small := []byte(`{"v":1}`)
	if err := s.SaveSnapshot(ctxT(t), "T", small); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadSnapshot(ctxT(t), "T"); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("after a small one: %q, %v", got, err)
	}
	if err := s.SaveSnapshot(ctxT(t), "T", make([]byte, 257*(8<<10))); err == nil {
		t.Fatal("a snapshot over the chunk bound was saved")
	}
}
