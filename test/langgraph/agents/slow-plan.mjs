// The slow agent's plan, shared by the exec agent (slow-agent.mjs) and the
// reference graph, so both stream the same chunks: "one ", "two ", "three",
// 100 ms apart; a prompt "slow: N" makes the gap N ms (to keep a run active).
export function slowPlan(prompt) {
  const m = /^slow:\s*(\d+)/.exec(prompt ?? "");
  return { chunks: ["one ", "two ", "three"], gapMs: m ? Number(m[1]) : 100 };
}
