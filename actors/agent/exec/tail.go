package exec

import "sync"

// tailBuffer keeps the last max bytes written to it: a program's stderr may
// be long, and only its end usually explains a failure.
type tailBuffer struct {
	max int

	mu  sync.Mutex // protects following fields
	buf []byte
	cut bool // bytes were dropped from the front
}

// Write keeps the tail of p; it never fails, so the program never sees
// EPIPE on stderr.
func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.cut = true
	}
	return len(p), nil
}

// String returns the kept bytes, prefixed with "..." if some were dropped.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cut {
		return "..." + string(b.buf)
	}
	return string(b.buf)
}
