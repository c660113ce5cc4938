package openai

import (
	"strings"
	"testing"
)

// FuzzReadStream: whatever a server sends, the stream's reader ends with
// one last message, nothing panics, and a hostile tool-call index cannot
// make the reply grow past its bound.
func FuzzReadStream(f *testing.F) {
	for _, seed := range []string{
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"ask_user\",\"arguments\":\"{\\\"q\"}}]}}]}\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}\n\n",
		": comment\nevent: x\ndata:{\"error\":{\"message\":\"boom\"}}\n\n",
		"data: {\"choices\":[{\"index\":0,\n\ndata: [DONE]",
		"data: {\"choices\":null}\r\n\r\ndata: [DONE]\r\n",
		"",
		"data: \"just a string\"\n\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		ch := make(chan streamMsg)
		stop := make(chan struct{})
		go readStream(strings.NewReader(in), ch, stop)
		var r reply
		for m := range ch {
			if m.last {
				close(stop)
				break
			}
			for _, c := range m.c.Choices {
				if c.Delta.Content != nil {
					r.text.WriteString(*c.Delta.Content)
				}
				for _, d := range c.Delta.ToolCalls {
					if err := r.addToolDelta(d); err != nil {
						break
					}
				}
			}
		}
		if len(r.calls) > maxToolCalls {
			t.Fatalf("%d tool calls, over the bound %d", len(r.calls), maxToolCalls)
		}
	})
}
