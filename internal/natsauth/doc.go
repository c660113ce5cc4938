// Package natsauth holds artifactr's NATS roles (runner, client, auditor,
// admin) as nats-server permissions, renders them as server configuration,
// and keeps the nkeys of an embedded server's users.
//
// Access control is NATS's own: one account with JetStream, one user per
// role authenticated by nkey (or JWT creds on an operator-mode cluster),
// and subject permissions. The fence orders honest writers; these
// permissions keep everyone else off the claim and run subjects, the lease
// bucket and the stream's configuration.
//
// The generated text is examples/nats/roles.conf; a test keeps the two
// equal and starts nats-server with the example to check every role.
//
// # Usage
//
//	keys, err := natsauth.LoadOrCreate(filepath.Join(data, "auth"), natsauth.Client)
//	conf := natsauth.PermissionsConf(natsauth.DefaultNames()) +
//		natsauth.AccountConf(natsauth.DefaultNames(), map[natsauth.Role]string{natsauth.Client: keys[0].Public})
//	opts := &server.Options{}
//	err = opts.ProcessConfigString(conf)
package natsauth
