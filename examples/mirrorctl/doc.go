// Command mirrorctl manages kmirror cluster mirrors over the Kafka wire
// protocol, with the verbs and flags of KIP-1279's kafka-cluster-mirrors.sh
// tool (spec §15.2):
//
//	mirrorctl --bootstrap-server HOST:PORT --create   --mirror NAME --mirror-config FILE
//	mirrorctl --bootstrap-server HOST:PORT --start    --mirror NAME --topics LIST [--exclude LIST]
//	mirrorctl --bootstrap-server HOST:PORT --stop     --mirror NAME --topics LIST
//	mirrorctl --bootstrap-server HOST:PORT --pause    --mirror NAME --topics LIST
//	mirrorctl --bootstrap-server HOST:PORT --resume   --mirror NAME --topics LIST
//	mirrorctl --bootstrap-server HOST:PORT --recover  --mirror NAME --topics LIST
//	mirrorctl --bootstrap-server HOST:PORT --delete   --mirror NAME
//	mirrorctl --bootstrap-server HOST:PORT --list     [--mirror NAME] [--state STATE] [--source-cluster-id ID]
//	mirrorctl --bootstrap-server HOST:PORT --describe [--mirror NAME] [--topics REGEX] [--failed]
//	mirrorctl --bootstrap-server HOST:PORT --add-acl    --mirror NAME --principal P --operation OPS [--host H] [--deny]
//	mirrorctl --bootstrap-server HOST:PORT --remove-acl --mirror NAME --principal P --operation OPS [--host H] [--deny]
//
// --add-acl and --remove-acl create and delete literal ACLs of the
// CLUSTER_MIRROR resource (one per operation: Describe, Alter, Create, All,
// ...) with CreateAcls and DeleteAcls on a kmirrord site; Kafka 4.4's
// kafka-acls has no option for that resource type. They need ALTER on the
// cluster (CLUSTER_AUTHORIZATION_FAILED otherwise).
//
// --stop, --pause and --resume take --wait: mirrorctl then returns once every
// partition of the topics is actually STOPPED (writable), PAUSED or MIRRORING,
// or fails when --timeout passes first (naming a partition that is not there
// yet) or a partition is FAILED. Stopping a topic that is already stopped, or
// pausing one already paused, exits 0 with a note, so runbooks can repeat a
// step. --command-config takes Kafka's client properties for mirrorctl's own
// connection: security.protocol, PEM trust and key stores, ssl.endpoint.
// identification.algorithm, sasl.mechanism PLAIN or SCRAM-SHA-256/512 with
// sasl.jaas.config or sasl.username and sasl.password. Pointed at an endpoint
// that speaks Kafka but not the mirror RPCs (a plain broker), mirrorctl says
// so. The describe table has TIME-LAG (age of the oldest unmirrored record),
// LME and ERROR (a partition error, a FAILED reason, or the cause of an
// unreachable source) columns.
//
// --dry-run (start, stop, pause, resume, recover) prints the plan, per
// partition: state now and after, the LME and where it was found, the
// truncation offset, the offsets and records it removes, the records written
// on this cluster since its stop that would go, the open transactions a stop
// aborts; the server changes nothing. A start that would remove records written
// on this cluster is refused (MIRROR_TRUNCATION_REFUSED, exit 1, the plan
// shown) unless --allow-truncation is given. Both need version 1 of the RPC;
// mirrorctl checks the server's ApiVersions first and sends nothing to an older
// server. A partition FAILED because its PREPARING refused such a removal (no
// start approved it: auto-discovery, a restart in PREPARING) is approved with
// --recover --allow-truncation (version 2 of RecoverMirrorTopics); --recover
// without it is refused the same way, with the plan.
//
// As in Kafka's tools, --topic is an alias of --topics, --timeout takes
// milliseconds (30000) as well as a Go duration (30s), --version prints the
// version, and a bad flag prints the problem and a short usage. Without --wait
// a lifecycle line says what is under way ("Stopping mirroring topic ..."), with
// --wait what is done ("Stopped ..."); --recover says per topic how many
// partitions were FAILED, or that none was.
//
// --bootstrap-server is the address of a kmirror admin server (admin.Server)
// of the destination. Tables are aligned like kafka-consumer-groups;
// --output json prints JSON instead. Exit codes: 0 success, 1 the request
// failed (the reason is on stderr), 2 bad usage.
//
// mirrorctl uses only public packages: admin.Client for the RPCs and
// statemachine for state names.
//
// main calls run(os.Args[1:], os.Stdout, os.Stderr); main_test.go drives the
// same run against an admin.Server serving adminhandler.New.
package main
