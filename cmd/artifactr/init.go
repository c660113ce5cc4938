package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// initCommand creates the stream and the buckets, for a NATS server where
// runners may not (examples/nats: only the admin role may).
func (a *app) initCommand() *cobra.Command {
	var (
		conn     connFlags
		replicas int
		bucket   string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create the stream and the buckets (as the admin role), or check them",
		Long: `Create the thread stream, the lease bucket and the thread-summaries bucket
on the NATS server, or check that they exist with a safe configuration.

On a server with artifactr's roles (examples/nats/roles.conf) only the admin
role may create, update or delete them, so run this once as admin before
starting runners:

  artifactr init --nats nats://host:4222 --nkey admin.nk --replicas 3

serve --auth does this itself for its embedded server. Running init again
changes nothing, except that with --partitions P and --replicas above 1 it
moves the partitions' leaders so that no server leads more than its share.

--partitions P (P > 1) makes P streams, <stream>-p0 to <stream>-p<P-1>,
each with its own leader on a cluster; every command must then pass the
same --partitions (docs/partitions.md).

--json prints one object instead: {"url","stream","summaries_bucket","replicas"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if replicas < 1 || replicas > 5 {
				return usagef("--replicas %d: want 1 to 5", replicas)
			}
			store, err := a.open(cmd.Context(), &conn, replicas)
			if err != nil {
				return err
			}
			defer store.Close()
			if _, err := store.OpenBucket(cmd.Context(), bucket, true); err != nil {
				return storeError(conn.url, err)
			}
			if conn.partitions > 1 && replicas > 1 {
				// Running init again rebalances leaders that drifted
				// (after a server restart, say).
				leaders, err := store.SpreadLeaders(cmd.Context())
				if err != nil {
					return storeError(conn.url, err)
				}
				if !asJSON {
					fmt.Fprintf(a.stdout, "artifactr init: partition leaders by server: %v\n", leaders)
				}
			}
			if asJSON {
				return writeJSON(a.stdout, initJSON{URL: conn.url, Stream: conn.stream, SummaryBucket: bucket, Replicas: replicas})
			}
			fmt.Fprintf(a.stdout, "artifactr init: stream %s, lease bucket and bucket %s ready on %s\n", conn.stream, bucket, conn.url)
			return nil
		},
	}
	addConnFlags(cmd, &conn)
	cmd.Flags().IntVar(&replicas, "replicas", 1, "replicas of the stream and buckets when init creates them (3 on a cluster)")
	addSummariesBucketFlag(cmd, &bucket)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
