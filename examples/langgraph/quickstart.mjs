// Drive artifactr from JavaScript with LangGraph's own SDK.
//   npm install @langchain/langgraph-sdk
//   artifactr serve --http 127.0.0.1:4280 &
//   node quickstart.mjs
// ARTIFACTR_URL overrides the address; ARTIFACTR_TOKEN is the bearer token
// when serve runs with --auth (DATA/auth/http-client.token).
import { Client } from "@langchain/langgraph-sdk";

const token = process.env.ARTIFACTR_TOKEN;
const client = new Client({
  apiUrl: process.env.ARTIFACTR_URL ?? "http://127.0.0.1:4280",
  apiKey: null,
  defaultHeaders: token ? { Authorization: `Bearer ${token}` } : {},
});

// A thread, and a run that waits for the answer.
const thread = await client.threads.create();
const result = await client.runs.wait(thread.thread_id, "echo", {
  input: { messages: [{ role: "user", content: "hello" }] },
});
console.log(result.messages.at(-1).content); // echo: hello

// The agent asks a question (an interrupt); answer it with command.resume,
// streaming the reply's tokens as they are written.
const asked = await client.runs.wait(thread.thread_id, "echo", {
  input: { messages: [{ role: "user", content: "ask: what is your name?" }] },
});
console.log("asks:", asked.__interrupt__[0].value); // asks: what is your name?
for await (const part of client.runs.stream(thread.thread_id, "echo", {
  command: { resume: "Ada" },
  streamMode: "messages-tuple",
})) {
  if (part.event === "messages") process.stdout.write(part.data[0].content);
}
process.stdout.write("\n"); // echo: what is your name? -> Ada
