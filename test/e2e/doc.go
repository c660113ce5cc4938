// Package e2e holds end-to-end tests of the artifactr binary: they build it
// once, start `artifactr serve` processes against an embedded or an
// in-test NATS server, and drive them with the client commands, including
// kill -9 and restart, two runners sharing a stream, and SIGTERM hand-over.
//
// Run them with:
//
//	go test -race ./test/e2e/...
package e2e
