package natsauth

import (
	"fmt"
	"strings"
)

// varName is the config variable holding r's permissions, such as RUNNER.
func varName(r Role) string { return strings.ToUpper(string(r)) }

// EnvName is the environment variable the example server config reads r's
// public nkey from, such as ARTIFACTR_RUNNER_NKEY.
func EnvName(r Role) string { return "ARTIFACTR_" + strings.ToUpper(string(r)) + "_NKEY" }

// PermissionsConf renders the roles' permissions as nats-server config
// variables (RUNNER, CLIENT, AUDITOR, ADMIN), for an operator to include
// and use as `permissions: $CLIENT`. examples/nats/roles.conf is this text
// for [DefaultNames].
func PermissionsConf(n Names) string {
	var b strings.Builder
	for _, r := range Roles {
		p, ok := n.Permissions(r)
		if !ok {
			// Admin: everything in the account.
			p = Perm{PubAllow: []string{">"}, SubAllow: []string{">"}}
		}
		fmt.Fprintf(&b, "%s = {\n", varName(r))
		writeSide(&b, "publish", p.PubAllow, p.PubDeny)
		writeSide(&b, "subscribe", p.SubAllow, p.SubDeny)
		b.WriteString("}\n\n")
	}
	return b.String()
}

func writeSide(b *strings.Builder, side string, allow, deny []string) {
	fmt.Fprintf(b, "  %s: {\n", side)
	writeList(b, "allow", allow)
	if len(deny) > 0 {
		writeList(b, "deny", deny)
	}
	b.WriteString("  }\n")
}

func writeList(b *strings.Builder, name string, subjects []string) {
	fmt.Fprintf(b, "    %s: [\n", name)
	for _, s := range subjects {
		fmt.Fprintf(b, "      %q\n", s)
	}
	b.WriteString("    ]\n")
}

// AccountConf renders an accounts block: one account, n.Account, with
// JetStream, whose users are the given roles' public nkeys (a key, or a
// config variable such as $ARTIFACTR_CLIENT_NKEY) with their permissions
// from [PermissionsConf].
func AccountConf(n Names, users map[Role]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "accounts {\n  %s {\n    jetstream: enabled\n    users: [\n", n.Account)
	for _, r := range Roles {
		if k, ok := users[r]; ok {
			fmt.Fprintf(&b, "      { nkey: %s, permissions: $%s }\n", k, varName(r))
		}
	}
	b.WriteString("    ]\n  }\n}\n")
	return b.String()
}

// AuthorizationConf renders an authorization block: the given roles'
// public nkeys as users of the server's global account, with their
// permissions from [PermissionsConf]. The embedded server uses it rather
// than [AccountConf] so that its JetStream data stays in the one account
// whether auth is on or off: turning --auth on for an existing data
// directory keeps the stream.
func AuthorizationConf(users map[Role]string) string {
	var b strings.Builder
	b.WriteString("authorization {\n  users: [\n")
	for _, r := range Roles {
		if k, ok := users[r]; ok {
			fmt.Fprintf(&b, "    { nkey: %s, permissions: $%s }\n", k, varName(r))
		}
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}
