// Package exec is the agent that runs any program once per turn and talks
// to it in JSON lines on its stdin and stdout, so agents can be written in
// any language (serve --agent exec). The protocol is below and in
// actors/agent/PROTOCOL.md.
//
// # Usage
//
//	var a agent.Agent = exec.Agent{Path: "python3", Args: []string{"agent.py"}, Timeout: time.Minute}
//	out, err := a.Run(ctx, turn) // ctx is cancelled when the claim is lost
//
// # Protocol
//
// [Agent] starts its program once per turn and speaks JSON lines: one JSON
// object per line, UTF-8, ending in "\n", on the program's stdin and stdout.
// Every object has a "type". Messages are objects
// {"seq":N,"id":"...","author":"...","text":"...","role":"user"}: role
// "user" for a thread message, "assistant" (with "run") for an earlier
// run's reply in history.
//
// artifactr writes to stdin:
//
//	{"type":"turn","protocol":2,"token":{"thread":"T","claim_seq":N,"run_id":"R"},"prompt":MESSAGE,"history":[MESSAGE...]}
//	    first line, exactly once. protocol is [Protocol]. history is the
//	    conversation before the prompt, oldest first: messages and earlier
//	    runs' replies; it is [] when empty, never null.
//	{"type":"answer","request_id":"ID","message":MESSAGE}
//	    the answer to an ask, written only after the program asked.
//	{"type":"steering","message":MESSAGE}
//	    a message posted while the turn runs; only if Agent.Steer is set.
//
// The program writes to stdout:
//
//	{"type":"output","text":"..."}        output, recorded as run_output
//	{"type":"ask","question":"..."}       opens a request and waits for an
//	                                      answer line; "request_id" is optional
//	                                      and echoed back, else it is "1", "2"...
//	                                      in order of asking
//	{"type":"done","output":"..."}        ends the turn; a non-empty output is
//	                                      the run's reply, else its outputs joined
//	{"type":"error","reason":"..."}       fails the turn with that reason
//
// Output lines are coalesced: their texts, joined with no separator, are
// written as one run_output event 50 ms after the first arrived or once
// 16 KiB are buffered. A turn's output has a budget (MaxOutputBytes,
// MaxOutputEvents); past it the turn fails and the program is killed.
// Emitting waits for the store, so a fast program is held back by its
// stdout pipe, and Timeout covers those writes. When the turn ends the
// program's process tree is killed, setsid children included; with
// [StartReaper] (serve does it) also the orphans it left.
//
// Blank lines and unknown fields are ignored; lines are at most 1 MiB. After
// an ask, artifactr reads no further stdout line until it has written the
// answer; steering posted meanwhile is written after the answer. A program
// should skip stdin lines of types it does not know, as types may be added.
// After done, artifactr closes stdin and the program should exit; after 2s
// its process group is killed. stderr is free text; its last 4 KiB are
// appended to failure reasons.
//
// A turn fails, and the program's process group is killed and reaped, when:
// the program sends error ("exec: program error: REASON"); it exits before
// done ("exec: program exited with status 3 before done"); it
// writes a line that is not JSON ("exec: malformed line 2: \"...\": ...",
// quoted and cut at 120 bytes), has an unknown type, or is too long; the
// turn's Timeout passes ("exec: timed out after 60s"; time waiting for an
// answer is not counted); or the run's context is cancelled ("exec: context
// canceled").
package exec
