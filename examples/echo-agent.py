#!/usr/bin/env python3
"""An artifactr agent speaking the exec protocol (actors/agent/PROTOCOL.md).

Run by `artifactr serve --agent exec -- python3 examples/echo-agent.py`.
It answers "py-echo: <prompt>". A prompt "ask: <question>" asks the question
and answers "py-echo: <question> -> <answer>". Steering received while it
waits for an answer is appended as " (steered: <text>)".
"""
import json
import sys


def send(obj):
    # One JSON object per line, flushed: artifactr reads line by line.
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def receive():
    line = sys.stdin.readline()
    if not line:
        return None  # artifactr closed stdin: the turn is over
    return json.loads(line)


def main():
    turn = receive()
    if turn is None or turn.get("type") != "turn":
        send({"type": "error", "reason": "expected a turn line"})
        return 1
    text = turn["prompt"]["text"]
    # With tracing on, "traceparent" names the turn's span: an agent using
    # OpenTelemetry extracts it to make its own spans children of the turn.
    print("turn %s of thread %s (traceparent %s)" % (turn["token"]["run_id"], turn["token"]["thread"],
                                                     turn.get("traceparent", "none")),
          file=sys.stderr)

    steered = ""
    if text.startswith("ask:"):
        question = text[len("ask:"):].strip()
        send({"type": "ask", "question": question})
        while True:
            msg = receive()
            if msg is None:
                return 1
            if msg["type"] == "steering":
                steered += " (steered: %s)" % msg["message"]["text"]
            elif msg["type"] == "answer":
                break
        out = "py-echo: %s -> %s" % (question, msg["message"]["text"])
    else:
        out = "py-echo: " + text

    send({"type": "output", "text": out})
    send({"type": "done", "output": out + steered})
    return 0


if __name__ == "__main__":
    sys.exit(main())
