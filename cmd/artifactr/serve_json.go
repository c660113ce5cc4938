package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"time"
)

// jsonLines turns serve's status lines ("artifactr serve: runner r1 ready
// on stream ARTIFACTR ...") into one JSON object per line, for serve
// --json: {"time","msg"}, msg without the "artifactr serve: " prefix.
type jsonLines struct {
	mu  sync.Mutex // protects buf and writes to enc
	buf []byte     // a line not yet ended
	enc *json.Encoder
	now func() time.Time
}

func newJSONLines(w io.Writer) *jsonLines {
	return &jsonLines{enc: json.NewEncoder(w), now: time.Now}
}

// statusJSON is one line of serve --json.
type statusJSON struct {
	Time time.Time `json:"time"`
	Msg  string    `json:"msg"`
}

func (j *jsonLines) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf = append(j.buf, p...)
	for {
		i := bytes.IndexByte(j.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimPrefix(string(j.buf[:i]), "artifactr serve: ")
		j.buf = j.buf[i+1:]
		if err := j.enc.Encode(statusJSON{Time: j.now().UTC(), Msg: line}); err != nil {
			return 0, err
		}
	}
}
