#!/usr/bin/env bash
# kafka.sh — install Apache Kafka (3.9 or 4.x) from Maven Central and run KRaft clusters on
# 127.0.0.1 for kmirror's real-Kafka tests (package internal/kafkatest).
#
# Subcommands:
#   install                 resolve kafka_2.13, kafka-tools and a log4j2 backend with Maven into the
#                           cache and write one classpath file, and compile the remote storage
#                           manager of KMIRROR_KAFKA_TIERED_STORAGE (idempotent).
#   start                   (install if needed) format and start the clusters of
#                           KMIRROR_KAFKA_CLUSTERS (default cluster A, 3 combined
#                           broker+controller nodes, and cluster B, 1 node), wait until every
#                           broker is registered, write <workdir>/env. A running setup is reused.
#   stop                    stop every node (SIGTERM, then SIGKILL after a timeout); always succeeds.
#   stop-node CLUSTER ID    stop one node (CLUSTER is a, b or c, ID its node id), keep its data.
#   start-node CLUSTER ID   start a stopped node again and wait until its cluster lists all brokers.
#   status                  one line per node, plus the broker count each cluster serves.
#   tls                     (re)generate the self-signed CA and broker certificate of B's SASL_SSL
#                           listener if missing (start does this itself).
#   logs [NODE] [LINES]     tail the broker logs (NODE like a1, a2, a3, b1; default all, 50 lines).
#   env                     print the env file.
#
# Settings (environment):
#   KMIRROR_KAFKA_VERSION        Kafka version from Maven Central (default 4.4.0; 3.9.x and 4.0.0+
#                                supported).
#   KMIRROR_KAFKA_CLUSTERS       the clusters this invocation runs: "a b" (default) or "c". With
#                                "c", KMIRROR_KAFKA_C_VERSION (default 3.9.1),
#                                KMIRROR_KAFKA_C_WORKDIR (default /tmp/kmirror-kafka-c) and
#                                KMIRROR_KAFKA_C_BASE_PORT (default 19300) replace the three
#                                generic settings, which A and B's env file exports.
#   KMIRROR_KAFKA_CACHE          download cache (default $HOME/.cache/kmirror/kafka).
#   KMIRROR_KAFKA_WORKDIR        data, logs, pids and the env file (default /tmp/kmirror-kafka).
#   KMIRROR_KAFKA_BASE_PORT      first port (default 19092). Layout, with P the base port:
#                                  A node i (1..3): client P+i-1, controller P+100+i-1
#                                  B node 1:        client P+10,  controller P+110,
#                                                   SASL_SSL (SCRAM-SHA-512 over TLS) P+20
#                                  C node 1:        client P+30,  controller P+130
#   KMIRROR_KAFKA_HEAP           JVM heap flags per node (default "-Xms256m -Xmx512m").
#   KMIRROR_KAFKA_JVM_OPTS       other JVM flags per node (default "-XX:+UseG1GC -XX:MaxGCPauseMillis=20").
#   KMIRROR_KAFKA_START_TIMEOUT  seconds to wait for a cluster to be ready (default 300).
#   KMIRROR_KAFKA_STOP_TIMEOUT   seconds between SIGTERM and SIGKILL (default 30).
#   KMIRROR_KAFKA_EXTRA_CONFIG   extra server.properties lines appended to every node.
#   KMIRROR_KAFKA_EXTRA_CONFIG_A / _B / _C   the same for one cluster only.
#   KMIRROR_KAFKA_FORMAT_ARGS    extra arguments for the storage tool's format command
#                                (e.g. "--feature eligible.leader.replicas.version=0").
#   KMIRROR_KAFKA_TIERED_STORAGE 1: every node of this invocation runs with tiered storage
#                                (remote.log.storage.system.enable=true) on
#                                scripts/kafka/FileRemoteStorageManager.java, a remote storage
#                                manager that keeps the "remote" segments in <node>/remote-storage
#                                (install compiles it with javac; start adds it to the classpath).
#   KMIRROR_KAFKA_C_AUTHORIZER   0: cluster C's node runs without its authorizer (default 1).
#
#   KMIRROR_KAFKA_SASL_USER      SCRAM-SHA-512 user of B's SASL_SSL listener (default kmirror).
#   KMIRROR_KAFKA_SASL_PASSWORD  its password (default kmirror-secret).
#
# TLS + SASL on cluster B: besides PLAINTEXT, B's node opens a SASL_SSL listener (P+20) that
# accepts SCRAM-SHA-512 only. start generates, once, a self-signed CA and a broker certificate for
# 127.0.0.1/localhost with openssl (<workdir>/tls: ca.pem, broker.p12), creates the SCRAM user
# with the storage tool's --add-scram at format time, and writes KMIRROR_KAFKA_B_SASL_SSL (address),
# KMIRROR_KAFKA_B_CA (CA PEM path), KMIRROR_KAFKA_B_USER and KMIRROR_KAFKA_B_PASSWORD to the env
# file. A running setup whose B node predates the listener is restarted from scratch by start.
#
# Cluster C, an older source: one node with an authorizer (StandardAuthorizer,
# allow.everyone.if.no.acl.found=true, super.users=User:ANONYMOUS, so the ACL APIs work and
# nothing is denied), meant to run another Kafka version beside A and B in its own work
# directory and ports. Its env file names only C (KMIRROR_KAFKA_C, KMIRROR_KAFKA_C_VERSION,
# KMIRROR_KAFKA_C_WORKDIR, KMIRROR_KAFKA_C_SCRIPT), so it can be sourced after A and B's:
#   KMIRROR_KAFKA_CLUSTERS=c bash scripts/kafka/kafka.sh start   # Kafka 3.9.1, ports 19330/19430
#   source /tmp/kmirror-kafka-c/env     # KMIRROR_KAFKA_C=127.0.0.1:19330
# The same settings are needed for its stop, status, logs, stop-node and start-node.
#
# Every listener binds to 127.0.0.1 only.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
SCRIPT_PATH="$SCRIPT_DIR/$(basename "${BASH_SOURCE[0]}")"

CLUSTERS="${KMIRROR_KAFKA_CLUSTERS:-a b}"
if [[ "$CLUSTERS" == c ]]; then
	# Cluster C has its own settings (A and B's env file exports the generic names), so it
	# never uses A and B's work directory, env file or ports.
	VERSION="${KMIRROR_KAFKA_C_VERSION:-3.9.1}"
	WORKDIR="${KMIRROR_KAFKA_C_WORKDIR:-/tmp/kmirror-kafka-c}"
	BASE_PORT="${KMIRROR_KAFKA_C_BASE_PORT:-19300}"
else
	VERSION="${KMIRROR_KAFKA_VERSION:-4.4.0}"
	WORKDIR="${KMIRROR_KAFKA_WORKDIR:-/tmp/kmirror-kafka}"
	BASE_PORT="${KMIRROR_KAFKA_BASE_PORT:-19092}"
fi
CACHE="${KMIRROR_KAFKA_CACHE:-${HOME:-/root}/.cache/kmirror/kafka}"
HEAP="${KMIRROR_KAFKA_HEAP:--Xms256m -Xmx512m}"
JVM_OPTS="${KMIRROR_KAFKA_JVM_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20}"
START_TIMEOUT="${KMIRROR_KAFKA_START_TIMEOUT:-300}"
STOP_TIMEOUT="${KMIRROR_KAFKA_STOP_TIMEOUT:-30}"
SASL_USER="${KMIRROR_KAFKA_SASL_USER:-kmirror}"
SASL_PASSWORD="${KMIRROR_KAFKA_SASL_PASSWORD:-kmirror-secret}"
TLS_DIR="$WORKDIR/tls"
TLS_STORE_PASSWORD="kmirror-test-store"

INSTALL_DIR="$CACHE/$VERSION"
CLASSPATH_FILE="$INSTALL_DIR/classpath"
TIERED_DIR="$INSTALL_DIR/tiered"
TIERED_CLASSPATH_FILE="$TIERED_DIR/classpath"
TIERED="${KMIRROR_KAFKA_TIERED_STORAGE:-0}"
C_AUTHORIZER="${KMIRROR_KAFKA_C_AUTHORIZER:-1}"
CLASSES_FILE="$INSTALL_DIR/classes"
PROBE="$WORKDIR/bin/kafkaprobe"

# Pinned logging backend: Kafka 4.x logs through slf4j to log4j2; kafka_2.13's published POM
# brings log4j-core but no slf4j binding, so add one (and a matching slf4j 2 API).
SLF4J_VERSION="2.0.17"
LOG4J_VERSION="2.25.5"

[[ -n "$WORKDIR" && "$WORKDIR" != / ]] || { echo "kafka.sh: bad KMIRROR_KAFKA_WORKDIR '$WORKDIR'" >&2; exit 1; }

NODES_A=(1 2 3)
NODES_B=(1)
NODES_C=(1)

case "$CLUSTERS" in
"a b" | "c") ;;
*) echo "kafka.sh: KMIRROR_KAFKA_CLUSTERS must be \"a b\" or \"c\", not '$CLUSTERS'" >&2; exit 1 ;;
esac
case "$VERSION" in
3.9.* | [4-9].*) ;;
*) echo "kafka.sh: Kafka $VERSION is not supported (3.9.x or 4.0.0+)" >&2; exit 1 ;;
esac

log() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ---------------------------------------------------------------------------------------------
# install

cmd_install() {
	if [[ -s "$CLASSPATH_FILE" && -s "$CLASSES_FILE" ]] && classpath_ok "$CLASSPATH_FILE"; then
		log "Kafka $VERSION already installed in $INSTALL_DIR"
		install_tiered
		return 0
	fi
	command -v java >/dev/null || die "java not found (Java 17+ required)"
	command -v mvn >/dev/null || die "mvn not found (Maven required to fetch Kafka)"
	mkdir -p "$INSTALL_DIR"
	local tmp="$INSTALL_DIR/.tmp.$$"
	rm -rf "$tmp"
	mkdir -p "$tmp/lib"
	write_pom >"$tmp/pom.xml"
	log "resolving org.apache.kafka:kafka_2.13:$VERSION and dependencies with Maven"
	local start=$SECONDS
	if ! (cd "$tmp" && mvn -B -q -Dmaven.repo.local="$CACHE/m2" \
		dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp/lib" \
		>"$tmp/mvn.log" 2>&1); then
		tail -n 40 "$tmp/mvn.log" >&2 || true
		rm -rf "$tmp"
		die "maven could not resolve Kafka $VERSION"
	fi
	# Drop the slf4j 1.x API that some transitive dependency drags in: the 2.x one wins. Kafka
	# 3.x also brings an slf4j 1.x binding to reload4j, which slf4j 2 ignores (with a warning).
	find "$tmp/lib" \( -name 'slf4j-api-1.*.jar' -o -name 'slf4j-reload4j-1.*.jar' \) -delete
	local storage_class dump_class
	storage_class="$(find_class "$tmp/lib" kafka/tools/StorageTool.class org/apache/kafka/tools/StorageTool.class)" ||
		die "no StorageTool class in Kafka $VERSION"
	dump_class="$(find_class "$tmp/lib" org/apache/kafka/tools/DumpLogSegments.class kafka/tools/DumpLogSegments.class)" ||
		die "no DumpLogSegments class in Kafka $VERSION"
	rm -rf "${INSTALL_DIR:?}/lib"
	mv "$tmp/lib" "$INSTALL_DIR/lib"
	mv "$tmp/pom.xml" "$INSTALL_DIR/pom.xml"
	rm -rf "$tmp"
	{
		echo "STORAGE_TOOL_CLASS=$storage_class"
		echo "DUMP_LOG_CLASS=$dump_class"
	} >"$CLASSES_FILE"
	find "$INSTALL_DIR/lib" -name '*.jar' | LC_ALL=C sort | paste -sd: - >"$CLASSPATH_FILE.new"
	mv "$CLASSPATH_FILE.new" "$CLASSPATH_FILE"
	log "installed Kafka $VERSION in $((SECONDS - start))s: $(du -sh "$INSTALL_DIR/lib" | cut -f1) of jars," \
		"storage tool $storage_class, dump tool $dump_class"
	install_tiered
}

# install_tiered compiles FileRemoteStorageManager.java (beside this script) against the installed
# jars into $TIERED_DIR/classes: the remote storage manager of KMIRROR_KAFKA_TIERED_STORAGE=1. Kafka's
# own LocalTieredStorage is not used: it ships only in kafka-storage's test jar, which Maven Central
# does not always serve and whose classes follow Kafka's internals from one version to the next.
install_tiered() {
	local src="$SCRIPT_DIR/FileRemoteStorageManager.java" out="$TIERED_DIR/classes"
	local class="$out/io/kmirror/kafkatest/FileRemoteStorageManager.class"
	if [[ -s "$TIERED_CLASSPATH_FILE" && -f "$class" && "$class" -nt "$src" ]]; then
		return 0
	fi
	command -v javac >/dev/null || die "javac not found (a JDK is needed for the tiered-storage test broker)"
	local tmp="$TIERED_DIR.tmp.$$"
	rm -rf "$tmp"
	mkdir -p "$tmp/classes"
	if ! javac -nowarn -d "$tmp/classes" -cp "$(cat "$CLASSPATH_FILE")" "$src" >"$tmp/javac.log" 2>&1; then
		cat "$tmp/javac.log" >&2
		rm -rf "$tmp"
		die "could not compile $src"
	fi
	rm -rf "$TIERED_DIR"
	mkdir -p "$TIERED_DIR"
	mv "$tmp/classes" "$out"
	rm -rf "$tmp"
	echo "$out" >"$TIERED_CLASSPATH_FILE"
	log "compiled FileRemoteStorageManager (tiered storage of test brokers) into $out"
}

# write_pom prints the pom whose runtime dependencies install copies: Kafka, its tools and a log4j2
# backend for slf4j.
write_pom() {
	cat <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.kmirror.test</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>$VERSION</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>$SLF4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
EOF
}

# find_class DIR ENTRY... prints the first class (dotted) whose entry some jar in DIR holds.
# Zip central directories store names uncompressed, so grep finds them without unzip.
find_class() {
	local dir="$1" entry jar
	shift
	for entry in "$@"; do
		for jar in "$dir"/*.jar; do
			if grep -a -q -F "$entry" "$jar"; then
				entry="${entry%.class}"
				echo "${entry//\//.}"
				return 0
			fi
		done
	done
	return 1
}

classpath_ok() { # classpath-file
	local jar
	IFS=: read -r -a jars <"$1"
	for jar in "${jars[@]}"; do
		[[ -f "$jar" ]] || return 1
	done
	return 0
}

load_install() {
	[[ -s "$CLASSPATH_FILE" && -s "$CLASSES_FILE" ]] || cmd_install
	CP="$(cat "$CLASSPATH_FILE")"
	if [[ "$TIERED" == 1 ]]; then
		install_tiered
		CP+=":$(cat "$TIERED_CLASSPATH_FILE")"
	fi
	# shellcheck disable=SC1090
	source "$CLASSES_FILE"
}

# ---------------------------------------------------------------------------------------------
# layout

port_offset() { # cluster: the cluster's first client port, relative to BASE_PORT
	case "$1" in
	a) echo 0 ;;
	b) echo 10 ;;
	*) echo 30 ;;
	esac
}
client_port() { echo $((BASE_PORT + $(port_offset "$1") + $2 - 1)); } # cluster id
sasl_ssl_port() { echo $((BASE_PORT + 20)); }
controller_port() { echo $((BASE_PORT + 100 + $(port_offset "$1") + $2 - 1)); }
nodes_of() {
	case "$1" in
	a) echo "${NODES_A[@]}" ;;
	b) echo "${NODES_B[@]}" ;;
	*) echo "${NODES_C[@]}" ;;
	esac
}
node_dir() { echo "$WORKDIR/$1$2"; }

bootstrap_of() {
	local c="$1" id out=""
	for id in $(nodes_of "$c"); do out+="${out:+,}127.0.0.1:$(client_port "$c" "$id")"; done
	echo "$out"
}

voters_of() {
	local c="$1" id out=""
	for id in $(nodes_of "$c"); do out+="${out:+,}$id@127.0.0.1:$(controller_port "$c" "$id")"; done
	echo "$out"
}

write_config() { # cluster id
	local c="$1" id="$2" dir n rf isr extra
	dir="$(node_dir "$c" "$id")"
	n=$(nodes_of "$c" | wc -w)
	rf=$((n < 3 ? n : 3))
	isr=$((rf > 1 ? 2 : 1))
	case "$c" in
	a) extra="${KMIRROR_KAFKA_EXTRA_CONFIG_A:-}" ;;
	b) extra="${KMIRROR_KAFKA_EXTRA_CONFIG_B:-}" ;;
	*)
		extra="${KMIRROR_KAFKA_EXTRA_CONFIG_C:-}"
		if [[ "$C_AUTHORIZER" != 0 ]]; then
			extra="# cluster C: an authorizer, so the ACL APIs answer; nothing is denied
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=true
super.users=User:ANONYMOUS
$extra"
		fi
		;;
	esac
	if [[ "$TIERED" == 1 ]]; then
		mkdir -p "$dir/remote-storage"
		extra="# tiered storage on FileRemoteStorageManager (KMIRROR_KAFKA_TIERED_STORAGE=1)
remote.log.storage.system.enable=true
remote.log.storage.manager.class.name=io.kmirror.kafkatest.FileRemoteStorageManager
rsm.config.dir=$dir/remote-storage
remote.log.metadata.manager.listener.name=PLAINTEXT
rlmm.config.remote.log.metadata.topic.replication.factor=$rf
rlmm.config.remote.log.metadata.topic.num.partitions=1
remote.log.manager.task.interval.ms=1000
log.retention.check.interval.ms=1000
# the first retention check (which deletes uploaded segments locally) 1 s after start, not 30 s
log.initial.task.delay.ms=1000
$extra"
	fi
	local listeners advertised protomap sasl=""
	listeners="PLAINTEXT://127.0.0.1:$(client_port "$c" "$id"),CONTROLLER://127.0.0.1:$(controller_port "$c" "$id")"
	advertised="PLAINTEXT://127.0.0.1:$(client_port "$c" "$id")"
	protomap="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
	if [[ "$c" == b ]]; then
		listeners+=",SASL_SSL://127.0.0.1:$(sasl_ssl_port)"
		advertised+=",SASL_SSL://127.0.0.1:$(sasl_ssl_port)"
		protomap+=",SASL_SSL:SASL_SSL"
		sasl="# SASL_SSL listener: SCRAM-SHA-512 over TLS (server certificate only, no client auth)
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.ssl.keystore.type=PKCS12
listener.name.sasl_ssl.ssl.keystore.location=$TLS_DIR/broker.p12
listener.name.sasl_ssl.ssl.keystore.password=$TLS_STORE_PASSWORD
listener.name.sasl_ssl.ssl.key.password=$TLS_STORE_PASSWORD
listener.name.sasl_ssl.ssl.client.auth=none"
	fi
	cat >"$dir/server.properties" <<EOF
# generated by scripts/kafka/kafka.sh — cluster $c node $id
process.roles=broker,controller
node.id=$id
controller.quorum.voters=$(voters_of "$c")
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protomap
$sasl
log.dirs=$dir/data
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=1
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
transaction.state.log.num.partitions=10
$(share_config "$rf" "$isr")
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
unclean.leader.election.enable=false
unclean.leader.election.interval.ms=1000
replica.lag.time.max.ms=10000
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
log.cleaner.threads=1
log.cleaner.backoff.ms=1000
${KMIRROR_KAFKA_EXTRA_CONFIG:-}
$extra
EOF
}

# share_config RF ISR: the share coordinator's settings, which Kafka 3.x does not know.
share_config() {
	[[ "$VERSION" == 3.* ]] && return 0
	printf 'share.coordinator.state.topic.replication.factor=%s\nshare.coordinator.state.topic.min.isr=%s\n' "$1" "$2"
}

write_log4j() {
	cat >"$WORKDIR/log4j2.properties" <<'EOF'
# generated by scripts/kafka/kafka.sh: every node logs to <node>/logs/server.log
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
logger.periodic.name = org.apache.kafka.controller.PeriodicTaskControlManager
logger.periodic.level = WARN
EOF
}

format_node() { # cluster id cluster-id
	local c="$1" id="$2" cid="$3" dir scram=()
	dir="$(node_dir "$c" "$id")"
	if [[ "$c" == b ]]; then
		scram=(--add-scram "SCRAM-SHA-512=[name=$SASL_USER,password=$SASL_PASSWORD]")
	fi
	# shellcheck disable=SC2086
	java -Xmx256m -cp "$CP" -Dlog4j2.configurationFile="$WORKDIR/log4j2.properties" \
		-Dkafka.logs.dir="$dir/logs" "$STORAGE_TOOL_CLASS" format \
		-t "$cid" -c "$dir/server.properties" ${KMIRROR_KAFKA_FORMAT_ARGS:-} "${scram[@]}" \
		>"$dir/logs/format.log" 2>&1 || {
		cat "$dir/logs/format.log" >&2
		return 1
	}
}

# Kafka cluster ids are 16 random bytes in URL-safe base64 without padding. Like Kafka's own
# Uuid.randomUuid, never one that starts with "-": the storage tool's argument parser would read
# it as an option (which made about one start in thirty fail).
random_cluster_id() {
	local id
	while :; do
		id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
		[[ "$id" == -* ]] || break
	done
	printf '%s\n' "$id"
}

# ---------------------------------------------------------------------------------------------
# TLS material of B's SASL_SSL listener

# cmd_tls writes <workdir>/tls/{ca.pem,ca.key,broker.pem,broker.key,broker.p12} unless a
# complete set exists whose broker certificate is valid for another day.
cmd_tls() {
	command -v openssl >/dev/null || die "openssl not found (needed for B's SASL_SSL listener)"
	if [[ -s "$TLS_DIR/ca.pem" && -s "$TLS_DIR/broker.p12" && -s "$TLS_DIR/broker.pem" ]] &&
		openssl x509 -checkend 86400 -noout -in "$TLS_DIR/broker.pem" >/dev/null 2>&1; then
		return 0
	fi
	local tmp="$TLS_DIR.tmp.$$"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	(
		cd "$tmp"
		openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=kmirror test CA" \
			-keyout ca.key -out ca.pem -addext "basicConstraints=critical,CA:TRUE" \
			-addext "keyUsage=critical,keyCertSign,cRLSign"
		openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout broker.key -out broker.csr
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >broker.ext
		openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 \
			-extfile broker.ext -out broker.pem
		openssl pkcs12 -export -in broker.pem -inkey broker.key -certfile ca.pem -name broker \
			-passout "pass:$TLS_STORE_PASSWORD" -out broker.p12
	) >"$tmp.log" 2>&1 || {
		cat "$tmp.log" >&2
		rm -rf "$tmp" "$tmp.log"
		die "could not generate TLS material"
	}
	rm -f "$tmp.log" "$tmp/broker.csr" "$tmp/broker.ext"
	rm -rf "$TLS_DIR"
	mv "$tmp" "$TLS_DIR"
	log "generated TLS material in $TLS_DIR"
}

# b_has_sasl reports whether B's node config has the SASL_SSL listener (older setups do not).
b_has_sasl() {
	grep -q '^listeners=.*SASL_SSL://' "$(node_dir b 1)/server.properties" 2>/dev/null
}

# ---------------------------------------------------------------------------------------------
# processes

node_pid() { # cluster id: prints the pid when the node runs
	local f pid
	f="$(node_dir "$1" "$2")/pid"
	[[ -s "$f" ]] || return 1
	pid="$(cat "$f")"
	# The pid must still be our JVM: its command line names this node's config file. A read
	# of /proc/PID/cmdline can come back empty while the process lives (a CI run once called
	# a starting node dead that was then found running): an empty read is read again, and
	# the match is made in the shell, with no pipeline for pipefail to fail.
	local cmd="" try
	for try in 1 2 3; do
		[[ -r "/proc/$pid/cmdline" ]] || return 1
		cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || cmd=""
		[[ -z "$cmd" ]] || break
		sleep 0.1
	done
	[[ "$cmd" == *"$(node_dir "$1" "$2")/server.properties"* ]] || return 1
	echo "$pid"
}

launch_node() { # cluster id
	local c="$1" id="$2" dir
	dir="$(node_dir "$c" "$id")"
	if node_pid "$c" "$id" >/dev/null; then
		log "node $c$id already running"
		return 0
	fi
	mkdir -p "$dir/logs"
	# shellcheck disable=SC2086
	setsid nohup java $HEAP $JVM_OPTS -server -XX:+ExitOnOutOfMemoryError \
		-Djava.awt.headless=true -Dkafka.logs.dir="$dir/logs" \
		-Dlog4j2.configurationFile="$WORKDIR/log4j2.properties" \
		-cp "$CP" kafka.Kafka "$dir/server.properties" \
		>"$dir/logs/stdout.log" 2>&1 </dev/null &
	echo $! >"$dir/pid"
}

# stop_pids TIMEOUT PID...: SIGTERM all, wait, SIGKILL the rest.
stop_pids() {
	local timeout="$1" pid deadline alive
	shift
	[[ $# -gt 0 ]] || return 0
	kill -TERM "$@" 2>/dev/null || true
	deadline=$((SECONDS + timeout))
	while :; do
		alive=()
		for pid in "$@"; do
			if kill -0 "$pid" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
				alive+=("$pid")
			fi
		done
		[[ ${#alive[@]} -gt 0 ]] || return 0
		if ((SECONDS >= deadline)); then
			log "SIGKILL after ${timeout}s: ${alive[*]}"
			kill -KILL "${alive[@]}" 2>/dev/null || true
			return 0
		fi
		sleep 0.2
	done
}

build_probe() {
	if [[ -x "$PROBE" && "$PROBE" -nt "$REPO_ROOT/internal/kafkatest/cmd/kafkaprobe/main.go" ]]; then
		return 0
	fi
	command -v go >/dev/null || die "go not found (needed to build the readiness probe)"
	mkdir -p "$(dirname "$PROBE")"
	(cd "$REPO_ROOT" && go build -o "$PROBE" ./internal/kafkatest/cmd/kafkaprobe)
}

# wait_cluster CLUSTER [-coordinators]: wait until the cluster's metadata lists all its brokers
# (and, with -coordinators, until it has created its offsets and transaction state topics).
# A node whose JVM exits meanwhile (a bad configuration, a class not found) fails the wait at
# once instead of after the timeout.
wait_cluster() {
	local c="$1" n probe rc=0 id dead="" dead_ids="" pid st
	n=$(nodes_of "$c" | wc -w)
	"$PROBE" -brokers "$(bootstrap_of "$c")" -want "$n" -timeout "${START_TIMEOUT}s" ${2:+"$2"} &
	probe=$!
	while kill -0 "$probe" 2>/dev/null; do
		for id in $(nodes_of "$c"); do
			if [[ -s "$(node_dir "$c" "$id")/pid" ]] && ! node_pid "$c" "$id" >/dev/null; then dead+=" $c$id"; dead_ids+=" $id"; fi
		done
		if [[ -n "$dead" ]]; then
			kill "$probe" 2>/dev/null || true
			break
		fi
		sleep 0.5
	done
	wait "$probe" || rc=$?
	if [[ -n "$dead" ]]; then
		log "node(s)$dead exited while cluster $c was starting; logs follow"
		for id in $dead_ids; do
			# The JVM is this shell's child when this invocation launched it: its exit
			# status tells a crash (1) from a kill (137 is SIGKILL, as the OOM killer sends).
			pid="$(cat "$(node_dir "$c" "$id")/pid")"
			if [[ -e "/proc/$pid" ]] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
				log "node $c$id (pid $pid) is still a process, but not its JVM any more"
				continue
			fi
			st=0
			wait "$pid" 2>/dev/null || st=$?
			[[ $st == 127 ]] || log "node $c$id (pid $pid) exit status $st"
		done
		for id in $(nodes_of "$c"); do
			dump_node_logs "$c" "$id" 40
		done
		NODE_EXITED=1
		return 1
	fi
	if [[ $rc != 0 ]]; then
		log "cluster $c not ready after ${START_TIMEOUT}s; logs follow"
		local id
		for id in $(nodes_of "$c"); do
			dump_node_logs "$c" "$id" 40
		done
		return 1
	fi
}

dump_node_logs() { # cluster id lines
	local dir
	dir="$(node_dir "$1" "$2")"
	echo "===== $1$2 server.log (last $3 lines) =====" >&2
	tail -n "$3" "$dir/logs/server.log" >&2 2>/dev/null || true
	echo "===== $1$2 stdout.log (last $3 lines) =====" >&2
	tail -n "$3" "$dir/logs/stdout.log" >&2 2>/dev/null || true
}

all_running() {
	local c id
	for c in $CLUSTERS; do
		for id in $(nodes_of "$c"); do
			node_pid "$c" "$id" >/dev/null || return 1
		done
	done
}

write_env() {
	local f="$WORKDIR/env"
	if [[ "$CLUSTERS" == c ]]; then
		write_env_c >"$f.new"
		mv "$f.new" "$f"
		return 0
	fi
	cat >"$f.new" <<EOF
# generated by scripts/kafka/kafka.sh start — source this file before go test
export KMIRROR_KAFKA_A=$(bootstrap_of a)
export KMIRROR_KAFKA_B=$(bootstrap_of b)
export KMIRROR_KAFKA_CLASSPATH=$CP
export KMIRROR_KAFKA_WORKDIR=$WORKDIR
export KMIRROR_KAFKA_VERSION=$VERSION
export KMIRROR_KAFKA_BASE_PORT=$BASE_PORT
export KMIRROR_KAFKA_SCRIPT=$SCRIPT_PATH
export KMIRROR_KAFKA_DUMP_LOG_CLASS=$DUMP_LOG_CLASS
export KMIRROR_KAFKA_B_SASL_SSL=127.0.0.1:$(sasl_ssl_port)
export KMIRROR_KAFKA_B_CA=$TLS_DIR/ca.pem
export KMIRROR_KAFKA_B_USER=$SASL_USER
export KMIRROR_KAFKA_B_PASSWORD=$SASL_PASSWORD
EOF
	mv "$f.new" "$f"
}

# write_env_c prints cluster C's env file: only C's names, so it never overrides A and B's.
write_env_c() {
	cat <<EOF
# generated by scripts/kafka/kafka.sh start (cluster C) — source this file before go test
export KMIRROR_KAFKA_C=$(bootstrap_of c)
export KMIRROR_KAFKA_C_VERSION=$VERSION
export KMIRROR_KAFKA_C_WORKDIR=$WORKDIR
export KMIRROR_KAFKA_C_BASE_PORT=$BASE_PORT
export KMIRROR_KAFKA_C_SCRIPT=$SCRIPT_PATH
EOF
}

# wait_all [-coordinators] waits for every cluster of this invocation.
wait_all() {
	local c
	for c in $CLUSTERS; do wait_cluster "$c" ${1:+"$1"} || return 1; done
}

# has_b reports whether this invocation runs cluster B.
has_b() { [[ " $CLUSTERS " == *" b "* ]]; }

# ---------------------------------------------------------------------------------------------
# subcommands

cmd_start() {
	load_install
	mkdir -p "$WORKDIR"
	build_probe
	if has_b; then cmd_tls; fi
	if all_running && has_b && ! b_has_sasl; then
		log "cluster B predates its SASL_SSL listener: restarting both clusters from scratch"
	elif all_running; then
		log "clusters already running; checking readiness"
		wait_all || exit 1
		write_env
		log "env: $WORKDIR/env"
		return 0
	fi
	cmd_stop
	local start=$SECONDS c id cid pids=()
	for c in $CLUSTERS; do rm -rf "$WORKDIR/$c"[0-9]*; done
	rm -f "$WORKDIR/env"
	write_log4j
	for c in $CLUSTERS; do
		cid="$(random_cluster_id)"
		echo "$cid" >"$WORKDIR/cluster-$c.id"
		for id in $(nodes_of "$c"); do
			mkdir -p "$(node_dir "$c" "$id")/data" "$(node_dir "$c" "$id")/logs"
			write_config "$c" "$id"
			format_node "$c" "$id" "$cid" &
			pids+=($!)
		done
	done
	local p
	for p in "${pids[@]}"; do wait "$p" || die "storage format failed"; done
	# A node whose JVM exits during startup is started once more, from its freshly formatted
	# storage: a CI run once lost a Kafka 3.9 node with no error in its logs (an outside kill,
	# not a bad configuration, which would fail the second attempt the same way).
	local attempt
	for attempt in 1 2; do
		NODE_EXITED=0
		for c in $CLUSTERS; do
			for id in $(nodes_of "$c"); do launch_node "$c" "$id"; done
		done
		if wait_all -coordinators; then break; fi
		cmd_stop
		if [[ $attempt == 2 || $NODE_EXITED != 1 ]]; then die "clusters did not start"; fi
		log "a node exited while starting: formatting the clusters again and starting them once more"
		pids=()
		for c in $CLUSTERS; do
			cid="$(cat "$WORKDIR/cluster-$c.id")"
			for id in $(nodes_of "$c"); do
				rm -rf "$(node_dir "$c" "$id")/data"
				mkdir -p "$(node_dir "$c" "$id")/data"
				format_node "$c" "$id" "$cid" &
				pids+=($!)
			done
		done
		for p in "${pids[@]}"; do wait "$p" || die "storage format failed"; done
	done
	write_env
	local where=""
	for c in $CLUSTERS; do where+=" ${c^^}=$(bootstrap_of "$c")"; done
	log "started Kafka $VERSION in $((SECONDS - start))s:$where"
	log "env: source $WORKDIR/env"
}

cmd_stop() {
	local c id pid pids=()
	for c in $CLUSTERS; do
		for id in $(nodes_of "$c"); do
			if pid="$(node_pid "$c" "$id")"; then pids+=("$pid"); fi
		done
	done
	if [[ ${#pids[@]} -gt 0 ]]; then
		log "stopping ${#pids[@]} node(s)"
		stop_pids "$STOP_TIMEOUT" "${pids[@]}"
	fi
	for c in $CLUSTERS; do
		for id in $(nodes_of "$c"); do rm -f "$(node_dir "$c" "$id")/pid"; done
	done
	return 0
}

check_node_args() {
	[[ $# -eq 2 ]] || die "usage: $0 $CMD a|b NODE_ID"
	[[ " $CLUSTERS " == *" $1 "* ]] || die "cluster must be one of $CLUSTERS (KMIRROR_KAFKA_CLUSTERS), not $1"
	[[ " $(nodes_of "$1") " == *" $2 "* ]] || die "cluster $1 has no node $2 (nodes: $(nodes_of "$1"))"
	[[ -f "$(node_dir "$1" "$2")/server.properties" ]] || die "node $1$2 was never started: run start first"
}

cmd_stop_node() {
	check_node_args "$@"
	local pid
	if pid="$(node_pid "$1" "$2")"; then
		stop_pids "$STOP_TIMEOUT" "$pid"
		log "stopped node $1$2"
	else
		log "node $1$2 not running"
	fi
	rm -f "$(node_dir "$1" "$2")/pid"
}

cmd_start_node() {
	check_node_args "$@"
	load_install
	build_probe
	launch_node "$1" "$2"
	wait_cluster "$1" || die "cluster $1 not ready after starting node $1$2"
	log "node $1$2 running"
}

# status exits 0 when at least one node runs.
cmd_status() {
	local c id pid state any=1 up
	for c in $CLUSTERS; do
		up=0
		for id in $(nodes_of "$c"); do
			if pid="$(node_pid "$c" "$id")"; then
				state="running pid $pid"
				any=0
				up=1
			else
				state="stopped"
			fi
			printf '%s%s client 127.0.0.1:%s controller 127.0.0.1:%s %s\n' "$c" "$id" \
				"$(client_port "$c" "$id")" "$(controller_port "$c" "$id")" "$state"
		done
		if [[ $up == 1 && -x "$PROBE" ]]; then
			printf 'cluster %s: ' "$c"
			"$PROBE" -brokers "$(bootstrap_of "$c")" -want 0 -timeout 3s -print 2>&1 || true
		fi
	done
	return $any
}

cmd_logs() {
	local node="${1:-}" lines="${2:-50}" c id
	for c in $CLUSTERS; do
		for id in $(nodes_of "$c"); do
			[[ -z "$node" || "$node" == "$c$id" ]] || continue
			dump_node_logs "$c" "$id" "$lines" 2>&1
		done
	done
}

CMD="${1:-}"
[[ $# -gt 0 ]] && shift
case "$CMD" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
stop-node) cmd_stop_node "$@" ;;
start-node) cmd_start_node "$@" ;;
status) cmd_status ;;
tls) cmd_tls ;;
logs) cmd_logs "$@" ;;
env) cat "$WORKDIR/env" ;;
*)
	awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
	[[ -z "$CMD" || "$CMD" == help || "$CMD" == -h || "$CMD" == --help ]] || exit 2
	;;
esac
