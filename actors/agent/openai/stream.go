package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxEventLine bounds one line of the event stream. A chunk carries a few
// tokens; a line this long is not a chat-completions stream.
const maxEventLine = 4 << 20

// errNoDone is the end of a stream that stopped before "data: [DONE]": the
// connection was cut, or the server is not an OpenAI-compatible one.
var errNoDone = errors.New("stream ended before data: [DONE] (truncated)")

// sseReader reads the data of server-sent events, as the WHATWG
// event-stream format defines them: "data:" lines, joined by "\n", make an
// event that a blank line ends; comments (":...") and other fields (event,
// id, retry) are skipped. One field is not skipped: llama.cpp's server
// reports a failure mid-stream as an "error: {...}" line.
type sseReader struct {
	sc     *bufio.Scanner
	events int // events returned so far, for error messages
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	return &sseReader{sc: sc}
}

// next returns the data of the next event that has any. At the end of the
// input it returns io.EOF; a last event not ended by a blank line is still
// returned, since a server that closes the connection after "data: [DONE]"
// has said all it meant to.
func (r *sseReader) next() (string, error) {
	var data []string
	has := false
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if len(line) == 0 {
			if has {
				r.events++
				return strings.Join(data, "\n"), nil
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if f := string(field); f != "data" && f != "error" {
			continue // a comment (empty field), event, id or retry
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if string(field) == "error" {
			return "", fmt.Errorf("server error in stream: %s", errorMessage(value))
		}
		data = append(data, string(value))
		has = true
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return "", fmt.Errorf("stream line longer than %d bytes", maxEventLine)
		}
		return "", err
	}
	if has {
		r.events++
		return strings.Join(data, "\n"), nil
	}
	return "", io.EOF
}

// streamMsg is what the stream's reader hands to the run: a chunk, or the
// end of the stream (last), with err nil after [DONE], or at the end of a
// stream whose reply had a finish_reason (noDone: some servers never send
// [DONE]).
type streamMsg struct {
	c      chunk
	last   bool
	err    error
	noDone bool
}

// readStream parses the chunks of body and sends them on out, ending with
// a last message. It gives up when stop is closed.
func readStream(body io.Reader, out chan<- streamMsg, stop <-chan struct{}) {
	send := func(m streamMsg) bool {
		select {
		case out <- m:
			return true
		case <-stop:
			return false
		}
	}
	sr := newSSEReader(body)
	finished := false // a finish_reason came: the reply is whole
	for {
		data, err := sr.next()
		switch {
		case errors.Is(err, io.EOF) && finished:
			send(streamMsg{last: true, noDone: true})
			return
		case errors.Is(err, io.EOF):
			send(streamMsg{last: true, err: errNoDone})
			return
		case err != nil:
			send(streamMsg{last: true, err: err})
			return
		case strings.TrimSpace(data) == "":
			continue
		case strings.TrimSpace(data) == "[DONE]":
			send(streamMsg{last: true})
			return
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			send(streamMsg{last: true, err: fmt.Errorf("malformed stream event %d: %s: %v", sr.events, quoteCut(data, 120), err)})
			return
		}
		if (len(c.Error) > 0 && string(c.Error) != "null") || c.Object == "error" {
			send(streamMsg{last: true, err: fmt.Errorf("server error in stream: %s", errorMessage([]byte(data)))})
			return
		}
		for _, ch := range c.Choices {
			if ch.Index == 0 && ch.FinishReason != nil && *ch.FinishReason != "" {
				finished = true
			}
		}
		if !send(streamMsg{c: c}) {
			return
		}
	}
}

// reply is one streamed assistant message, assembled from its chunks.
type reply struct {
	text  strings.Builder
	calls []toolCall
}

// maxToolCalls bounds the tool calls of one reply, so a hostile index
// cannot make the agent allocate without bound.
const maxToolCalls = 64

// addToolDelta folds one piece of a tool call into r.calls.
func (r *reply) addToolDelta(d toolCallDelta) error {
	var i int
	switch {
	case d.Index != nil:
		i = *d.Index
	case d.ID != "" && (len(r.calls) == 0 || r.calls[len(r.calls)-1].ID != d.ID):
		i = len(r.calls) // a server that sends each call whole, without index
	default:
		i = max(len(r.calls)-1, 0)
	}
	if i < 0 || i >= maxToolCalls {
		return fmt.Errorf("malformed stream: tool call index %d out of range [0, %d)", i, maxToolCalls)
	}
	for len(r.calls) <= i {
		r.calls = append(r.calls, toolCall{Type: "function"})
	}
	c := &r.calls[i]
	if d.ID != "" {
		c.ID = d.ID
	}
	// The name comes whole in the first piece; some servers repeat it in
	// every piece, and appending it then would garble it.
	if n := d.Function.Name; n != "" && n != c.Function.Name {
		c.Function.Name += n
	}
	c.Function.Arguments += d.Function.Arguments
	return nil
}

// describe renders a server's error object for a run_failed reason.
func (e *apiError) describe() string {
	msg := strings.TrimSpace(e.Message)
	if msg == "" {
		msg = "(no message)"
	}
	var extra []string
	if e.Type != "" {
		extra = append(extra, "type "+e.Type)
	}
	if c := strings.Trim(string(e.Code), `"`); c != "" && c != "null" {
		extra = append(extra, "code "+c)
	}
	if len(extra) > 0 {
		msg += " (" + strings.Join(extra, ", ") + ")"
	}
	return msg
}

// quoteCut quotes s, cut to n bytes, for an error message.
func quoteCut(s string, n int) string {
	if len(s) > n {
		cut := n
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q...", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
