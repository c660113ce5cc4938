#!/usr/bin/env python3
"""An artifactr agent speaking the exec protocol (actors/agent/PROTOCOL.md).

Run by `artifactr serve --agent exec -- python3 examples/echo-agent.py`.
It answers "py-echo: <prompt>". A prompt "ask: <question>" asks the question
and answers "py-echo: <question> -> <answer>". Before it is done it asks for
steering (`serve --steer`): each message posted during the turn is appended
as " (steered: <text>)".
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


def receive_type(typ):
    # Lines of other types are skipped: types may be added.
    while True:
        msg = receive()
        if msg is None or msg.get("type") == typ:
            return msg


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
        msg = receive_type("answer")
        if msg is None:
            return 1
        out = "py-echo: %s -> %s" % (question, msg["message"]["text"])
    else:
        out = "py-echo: " + text

    send({"type": "output", "text": out})
    # The checkpoint before the end: steering is given only when asked, so
    # every message given to this turn is one it reads.
    send({"type": "steer"})
    msg = receive_type("steering")
    if msg is None:
        return 1
    for m in msg["messages"]:
        steered += " (steered: %s)" % m["text"]
    send({"type": "done", "output": out + steered})
    return 0


if __name__ == "__main__":
    sys.exit(main())
