// Package auth keeps the SCRAM credentials of a kmirror site and serves the
// Kafka RPCs that manage them.
//
// A Store holds, per user and SCRAM mechanism, what RFC 5802 lets a server
// keep: the salt, the iteration count, StoredKey and ServerKey — never a
// password. A file store lives in one JSON file of the site's data directory
// (CredentialsFile), replaced atomically and fsynced (internal/atomicfile)
// before a change is acknowledged. The Store is the admin.CredentialStore of
// an admin.Server's SASLConfig: SCRAM-SHA-256/512 log-ins are checked against
// it, and so is SASL PLAIN (the password is salted with the stored salt and
// compared with StoredKey; Kafka's PLAIN checks a JAAS list instead).
//
// Store.APIs serves DescribeUserScramCredentials (50) and
// AlterUserScramCredentials (51) as admin.ExtraAPI keys, with Kafka's
// per-user results and codes, so that kafka-configs --entity-type users
// --alter --add-config 'SCRAM-SHA-512=[password=...]' works against a site.
// Authorization is a hook (Config.Authorize): Kafka asks for DESCRIBE and
// ALTER on the CLUSTER resource.
//
// ParseAddScram reads kafka-storage's --add-scram syntax, so that a host can
// create its first user before it listens.
//
// The package sits below the facade: admin must not import mirror, and the
// store's files belong to the data directory like mirror/localdest's.
package auth
