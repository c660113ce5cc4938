// Package openai is an artifactr agent backed by any server that speaks
// OpenAI's chat-completions API with streaming: OpenAI itself, Ollama, vLLM
// and llama.cpp's llama-server. It uses net/http only.
//
// # Usage
//
//	a, err := openai.New(openai.Config{
//		BaseURL: "http://localhost:11434/v1", // Ollama; OpenAI: https://api.openai.com/v1
//		Model:   "llama3.2",
//		APIKey:  os.Getenv("OPENAI_API_KEY"), // may be empty for local servers
//		System:  "You are a terse assistant.",
//	})
//	out, err := a.Run(ctx, turn) // as any agent.Agent; out is always ""
//
// From the command line:
//
//	ollama serve &
//	ollama pull llama3.2
//	artifactr serve --agent openai --base-url http://localhost:11434/v1 --model llama3.2
//	artifactr post t1 "Why is the sky blue?" --wait
//
// # A turn
//
// Each run POSTs {BaseURL}/chat/completions with "stream": true and reads
// the server-sent events ("data: {chunk}" lines, ending with
// "data: [DONE]"). The conversation is the optional system prompt, then the
// thread's conversation and the prompt: the runner's turns are
// [agent.Conversational], so earlier runs' replies (their outputs joined)
// have role "assistant" where each run ended, as do messages whose author
// is [Config.AssistantAuthor]; every other message has role "user" (with
// its author as "name" when OpenAI accepts it as one).
//
// The reply's text is emitted as run_output events as it streams,
// coalesced: buffered text is emitted [Config.FlushInterval] (50 ms) after
// its first byte, or as soon as [Config.FlushBytes] (1 KiB) are buffered,
// and at the end. Since every word is recorded as run_output, Run returns
// an empty final output: the run's text is its outputs joined with no
// separator.
//
// The request declares one tool, ask_user, taking {"question": string}.
// When the model calls it, the buffered text is emitted, the question is
// asked with [agent.Turn.Ask] (a request_opened event, answered by the
// thread's next message), and the answer goes back to the model as the
// tool's result in a new request, until the model replies without a tool
// call or [Config.MaxToolRounds] requests were made. Tool-call pieces
// streamed across chunks are assembled by index. A call of another tool,
// or with arguments that are not {"question": "..."}, is answered with an
// error the model can read, not asked.
//
// With [Config.Steer] (serve --steer) the agent is steerable: a message
// posted during a run is added to the conversation as the user's, after the
// tool results if the model was asking, and once the model's current reply
// ends it is asked again with that reply before the message. The agent
// takes steering ([agent.Turn.Steer]) when a reply ends and after its tool
// calls, so a message is consumed only when the model will read it.
// Without Steer, such messages wait for the next run.
//
// When tracing is on, each request carries the turn's W3C traceparent
// header, so a server that traces (vLLM) joins the poster's trace.
//
// # Servers
//
// The tests use an in-process fake server that speaks the format as OpenAI
// documents it, with the variants that Ollama (whole tool calls), vLLM and
// llama.cpp (error bodies, "error:" lines) are known to send, and the SSE
// format's comments and fields; no real model server runs in them.
// llama.cpp's llama-server takes tools only with --jinja (the default in
// recent versions); without it, every request fails with "tools param
// requires --jinja flag": set [Config.NoTools] (serve --openai-no-tools).
//
// # Failures
//
// A run fails (run_failed) with a reason starting "openai: " when:
//   - the server answers non-2xx: the reason carries the status and the
//     server's error message;
//   - it answers 429, 500, 502, 503 or 504 more than [Config.MaxRetries]
//     times, or asks (Retry-After, in seconds or as an HTTP date, or
//     retry-after-ms) to wait longer than [Config.MaxRetryWait]; until then
//     the request is retried after that wait, or after 0.5 s doubling,
//     each retry logged at WARN ([Config.Logger]);
//   - a request outlasts [Config.RequestTimeout], or the server sends no
//     byte for [Config.IdleTimeout];
//   - the stream is malformed: a chunk is not JSON, it carries an error
//     object, or the stream ends before "data: [DONE]" and before a
//     finish_reason (a stream that ends after its finish_reason without
//     [DONE], as some servers send, is taken as whole, with a warning);
//   - the run's context is cancelled (its claim was lost, or serve stops):
//     Run returns at once and closes the response body.
//
// Reasons name the serve flags that set a limit, as in "(serve
// --openai-idle-timeout)". [Agent.Probe] checks at start that BaseURL
// answers.
//
// No request is retried once its stream has begun, so no text is sent to
// the thread twice. Text streamed before a failure is kept as run_output.
package openai
