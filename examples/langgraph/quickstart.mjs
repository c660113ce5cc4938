// npm install @langchain/langgraph-sdk; node quickstart.mjs
// ARTIFACTR_URL is serve's --http address; under serve --auth, ARTIFACTR_TOKEN
// is the token in DATA/auth/http-client.token.
import { Client } from "@langchain/langgraph-sdk";

const token = process.env.ARTIFACTR_TOKEN;
const client = new Client({
  apiUrl: process.env.ARTIFACTR_URL ?? "http://127.0.0.1:4280",
  apiKey: null,
  defaultHeaders: token ? { Authorization: `Bearer ${token}` } : {},
});

const thread = await client.threads.create();
const result = await client.runs.wait(thread.thread_id, "echo", {
  input: { messages: [{ role: "user", content: "hello" }] },
});
console.log(result.messages.at(-1).content); // echo: hello

// An ask: prompt is an interrupt; command.resume answers it, and the reply streams.
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
