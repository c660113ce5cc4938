package openai_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/artifactr/artifactr/actors/agent/agenttest"
	"github.com/artifactr/artifactr/actors/agent/openai"
)

// BenchmarkAgent_Run_stream: one turn streaming 10,000 four-byte tokens as
// fast as the loopback carries them; reports tokens/s and how many
// run_output events the coalescing made of them.
//
//	go test -run '^$' -bench Agent_Run_stream -benchtime 20x ./actors/agent/openai/
func BenchmarkAgent_Run_stream(b *testing.B) {
	const tokens = 10000
	var body strings.Builder
	for range tokens {
		body.WriteString(`data: {"id":"chatcmpl-x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}` + "\n\n")
	}
	body.WriteString("data: [DONE]\n\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(body.String()))
	}))
	defer srv.Close()
	a, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m", HTTPClient: srv.Client()})
	if err != nil {
		b.Fatal(err)
	}
	events := 0
	b.ResetTimer()
	for range b.N {
		turn := agenttest.NewTurn("go")
		if _, err := a.Run(context.Background(), turn); err != nil {
			b.Fatal(err)
		}
		events += len(turn.Outputs())
	}
	b.ReportMetric(float64(tokens*b.N)/b.Elapsed().Seconds(), "tokens/s")
	b.ReportMetric(float64(events)/float64(b.N), "run_outputs/turn")
}
