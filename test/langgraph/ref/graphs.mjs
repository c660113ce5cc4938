// Graphs for LangGraph's own server that behave like artifactr's agents, so
// the suite can run against both: "echo" as artifactr's echo agent, "slow" as
// the suite's exec agent (../agents/slow-agent.mjs).
import {
  StateGraph,
  MessagesAnnotation,
  interrupt,
  START,
  END,
} from "@langchain/langgraph";
import { AIMessage, AIMessageChunk } from "@langchain/core/messages";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { ChatGenerationChunk } from "@langchain/core/outputs";
import { slowPlan } from "../agents/slow-plan.mjs";

const textOf = (m) =>
  typeof m.content === "string"
    ? m.content
    : m.content.map((p) => (typeof p === "string" ? p : p.text ?? "")).join("");

// echo: "hello" -> "echo: hello"; "ask: Q" -> interrupt(Q), then "echo: Q -> R";
// "fail: R" fails the run.
const echoNode = async (state) => {
  const text = textOf(state.messages.at(-1));
  if (text.startsWith("ask:")) {
    const q = text.slice(4).trim();
    const answer = interrupt(q);
    return { messages: [new AIMessage(`echo: ${q} -> ${answer}`)] };
  }
  if (text.startsWith("fail:")) throw new Error(`echo: ${text.slice(5).trim()}`);
  return { messages: [new AIMessage(`echo: ${text}`)] };
};

export const echo = new StateGraph(MessagesAnnotation)
  .addNode("agent", echoNode)
  .addEdge(START, "agent")
  .addEdge("agent", END)
  .compile();

// A chat model whose tokens are slowPlan's chunks, slowPlan's gap apart: the
// way a node's tokens reach LangGraph's messages stream mode.
class SlowModel extends BaseChatModel {
  _llmType() {
    return "slow";
  }
  async _generate(messages, options, runManager) {
    let text = "";
    for await (const c of this._streamResponseChunks(messages, options, runManager)) text += c.text;
    return { generations: [{ text, message: new AIMessage(text) }] };
  }
  async *_streamResponseChunks(messages, options, runManager) {
    const { chunks, gapMs } = slowPlan(textOf(messages.at(-1)));
    for (const [i, chunk] of chunks.entries()) {
      if (i > 0) await new Promise((r) => setTimeout(r, gapMs));
      if (options.signal?.aborted) throw new Error("aborted");
      const cg = new ChatGenerationChunk({ message: new AIMessageChunk({ content: chunk }), text: chunk });
      yield cg;
      await runManager?.handleLLMNewToken(chunk, undefined, undefined, undefined, undefined, { chunk: cg });
    }
  }
}

const model = new SlowModel({});

export const slow = new StateGraph(MessagesAnnotation)
  .addNode("agent", async (state, config) => ({ messages: [await model.invoke(state.messages, config)] }))
  .addEdge(START, "agent")
  .addEdge("agent", END)
  .compile();
