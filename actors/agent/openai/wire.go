package openai

import "encoding/json"

// The chat-completions wire format: only the fields this agent sends or
// reads. Servers ignore fields they do not know, and so does this agent.

// chatRequest is the body POSTed to {base}/chat/completions.
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	Stream   bool          `json:"stream"`
	Tools    []tool        `json:"tools,omitempty"`
}

// chatMessage is one message of the conversation. Content is a pointer
// because an assistant message that only calls tools carries "content":
// null, which some servers require rather than "".
type chatMessage struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type tool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type toolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function toolCallFunction `json:"function"`
}

type toolCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chunk is one "data:" event of a streamed response. A server may put an
// error in the stream instead of a chunk when generation fails after the
// headers were sent: {"error":{...}} (OpenAI, vLLM) or an error object
// itself, {"object":"error","message":...} (older vLLM).
type chunk struct {
	Choices []chunkChoice   `json:"choices"`
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Content   *string         `json:"content"`
	ToolCalls []toolCallDelta `json:"tool_calls"`
}

// toolCallDelta is a piece of a tool call. Index says which call it
// continues; the first piece carries ID and Function.Name, and the
// arguments arrive in pieces to be joined. Index is a pointer because some
// servers leave it out when they send each call whole.
type toolCallDelta struct {
	Index    *int             `json:"index"`
	ID       string           `json:"id"`
	Function toolCallFunction `json:"function"`
}

// apiError is the error object of OpenAI-compatible servers:
// {"error":{"message":"...","type":"...","code":...}}.
type apiError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// askUserName is the tool that asks the thread's user a question.
const askUserName = "ask_user"

// askUserTool declares ask_user to the model.
var askUserTool = tool{
	Type: "function",
	Function: toolFunction{
		Name: askUserName,
		Description: "Ask the user a question and wait for the answer. Use it when you need " +
			"information or a decision that only the user can give.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string",` +
			`"description":"The question, as the user will read it."}},"required":["question"]}`),
	},
}

func ptr[T any](v T) *T { return &v }
