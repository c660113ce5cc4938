// Package bench holds the benchmarks `artifactr bench` runs, apart from
// the CLI that parses their flags and prints --json. Each runs on an
// embedded server in a throw-away directory ([StartTemp]) and prints its
// text lines to the writer it is given.
//
// So far it holds the audit benchmark ([Audit]); bench turns, http, scale
// and long still live in cmd/artifactr.
package bench
