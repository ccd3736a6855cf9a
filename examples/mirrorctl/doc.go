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
// same run against an admin.Server serving mirror.NewAdminHandler.
package main
