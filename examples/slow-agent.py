#!/usr/bin/env python3
"""An artifactr agent that takes its time (actors/agent/PROTOCOL.md).

Run by `artifactr serve --agent exec -- python3 examples/slow-agent.py [SECONDS]`.
It says "slow: " and then the prompt back one word at a time, one word
every SECONDS (default 1), as a language model streams tokens: a prompt of
ten words keeps the run active for ten seconds. So there is time to post
while it runs (double texting), to cancel it, and to watch `post --follow`
print each word as it comes. Cancelled (SIGTERM), it exits at once.
"""
import json
import sys
import time


def send(obj):
    # One JSON object per line, flushed: artifactr reads line by line.
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    delay = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    line = sys.stdin.readline()
    turn = json.loads(line) if line else None
    if turn is None or turn.get("type") != "turn":
        send({"type": "error", "reason": "expected a turn line"})
        return 1
    send({"type": "output", "text": "slow:"})
    for word in turn["prompt"]["text"].split():
        time.sleep(delay)
        send({"type": "output", "text": " " + word})
    send({"type": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
