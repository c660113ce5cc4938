package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
)

// TestParsePubAck checks the fast ack reader against encoding/json on the
// replies the server writes and on ones it falls back for.
func TestParsePubAck(t *testing.T) {
	for _, tc := range []struct {
		in   string
		fast bool
	}{
		{`{"stream":"ARTIFACTR","seq":1}`, true},
		{`{"stream":"KV_leases","seq":18446744073709551615}`, true},
		{`{"stream":"S","domain":"hub","seq":42}`, true},
		{`{"stream":"S","seq":7,"duplicate": true}`, true},
		{`{"stream":"S","domain":"d","seq":7,"duplicate":true}`, true},
		{`{"stream":"S","seq":7,"batch":"b","count":2}`, false},
		{`{"stream":"S\"x","seq":7}`, false},
		{`{"stream":"S","seq":7,"val":"3"}`, false},
		{`{ "stream":"S", "seq":7 }`, false},
		{`{"stream":"S","seq":7} `, false},
		{`{"stream":"S","seq":}`, false},
		{`{"stream":"S","seq":99999999999999999999}`, false},
	} {
		fast, ok := fastPubAck([]byte(tc.in))
		if ok != tc.fast {
			t.Errorf("%s: fast read %v, want %v", tc.in, ok, tc.fast)
		}
		var want struct{ *jetstream.PubAck }
		jerr := json.Unmarshal([]byte(tc.in), &want)
		got, err := parsePubAck([]byte(tc.in))
		if jerr != nil || want.PubAck == nil {
			if err == nil {
				t.Errorf("%s: parsed as %+v, encoding/json refuses it", tc.in, got)
			}
			continue
		}
		if err != nil || *got != *want.PubAck {
			t.Errorf("%s: got %+v, %v; encoding/json reads %+v", tc.in, got, err, *want.PubAck)
		}
		if ok && *fast != *want.PubAck {
			t.Errorf("%s: fast read %+v, encoding/json reads %+v", tc.in, *fast, *want.PubAck)
		}
	}
}

func TestParsePubAck_errors(t *testing.T) {
	_, err := parsePubAck([]byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"},"stream":"S","seq":0}`))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence || apiErr.Code != 400 {
		t.Fatalf("error reply read as %v", err)
	}
	for _, bad := range []string{``, `nope`, `{}`, `{"stream":""}`} {
		if _, err := parsePubAck([]byte(bad)); !errors.Is(err, jetstream.ErrInvalidJSAck) {
			t.Errorf("%q: err %v, want ErrInvalidJSAck", bad, err)
		}
	}
}

// TestParsePubAck_serverAcksAreFast checks that the acks a real server sends
// a store's writes, first and duplicate, take the fast read.
func TestParsePubAck_serverAcksAreFast(t *testing.T) {
	s := open(t, natsembedtest.RunForTest(t))
	var replies [][]byte
	s.send = func(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
		resp, err := s.nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			return nil, err
		}
		replies = append(replies, resp.Data)
		return parsePubAck(resp.Data)
	}
	post(t, s, "T", "m1")
	claim(t, s, "T", "A")
	// The same append again: a duplicate ack (a repost is answered by
	// its message id's key, without a publish).
	cfg := events.NewThreadConfigured("T", time.Now(), events.StrategyEnqueue)
	for range 2 {
		if _, err := s.Append(ctxT(t), cfg, events.Check{}, events.WithMsgID("T:cfg")); err != nil {
			t.Fatal(err)
		}
	}
	if len(replies) < 4 {
		t.Fatalf("%d replies seen, want at least 3", len(replies))
	}
	var dup bool
	for _, r := range replies {
		pa, ok := fastPubAck(r)
		if !ok {
			t.Errorf("server ack %s not read by the fast path", r)
			continue
		}
		dup = dup || pa.Duplicate
	}
	if !dup {
		t.Errorf("no duplicate ack among %q", replies)
	}
}
