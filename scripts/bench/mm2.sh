#!/usr/bin/env bash
# mm2.sh — resolve Apache Kafka MirrorMaker 2 (org.apache.kafka:connect-mirror and its
# connect-runtime) from Maven Central into a cache, for the side-by-side benchmark program
# (go run ./internal/bench/cmd/bench). The benchmark launches MM2 itself in dedicated mode
# (java -cp "$(mm2.sh classpath)" org.apache.kafka.connect.mirror.MirrorMaker FILE --clusters B).
#
# Subcommands:
#   install     resolve the jars with Maven into the cache and write one classpath file (idempotent).
#   classpath   (install if needed) print the classpath (colon-separated jar paths) on stdout.
#   run FILE [ARG...]  (install if needed) exec MirrorMaker in dedicated mode with the properties
#               FILE and ARGs (e.g. --clusters B).
#
# Settings (environment):
#   KMIRROR_MM2_VERSION     connect-mirror version from Maven Central (default 4.3.1: Maven Central
#                           serves no connect-mirror or connect-mirror-client 4.4.0 here, while the
#                           brokers run 4.4.0; MM2 is only a client of both clusters, so a 4.3 client
#                           against 4.4 brokers is a supported combination).
#   KMIRROR_MM2_CACHE       download cache (default $HOME/.cache/kmirror/mm2).
set -euo pipefail

VERSION="${KMIRROR_MM2_VERSION:-4.3.1}"
CACHE="${KMIRROR_MM2_CACHE:-${HOME:-/root}/.cache/kmirror/mm2}"
INSTALL_DIR="$CACHE/$VERSION"
CLASSPATH_FILE="$INSTALL_DIR/classpath"

# Pinned logging backend, as in scripts/kafka/kafka.sh: slf4j 2 bound to log4j2.
SLF4J_VERSION="2.0.17"
LOG4J_VERSION="2.25.5"

log() { printf 'mm2.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

classpath_ok() {
	local jar
	[[ -s "$CLASSPATH_FILE" ]] || return 1
	IFS=: read -r -a jars <"$CLASSPATH_FILE"
	for jar in "${jars[@]}"; do
		[[ -f "$jar" ]] || return 1
	done
}

write_pom() {
	cat <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.kmirror.bench</groupId>
  <artifactId>mm2-runtime</artifactId>
  <version>$VERSION</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>connect-mirror</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>connect-runtime</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>$SLF4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
POM
}

cmd_install() {
	if classpath_ok; then
		log "MirrorMaker 2 $VERSION already installed in $INSTALL_DIR"
		return 0
	fi
	command -v java >/dev/null || die "java not found (Java 17+ required)"
	command -v mvn >/dev/null || die "mvn not found (Maven required to fetch MirrorMaker 2)"
	mkdir -p "$INSTALL_DIR"
	local tmp="$INSTALL_DIR/.tmp.$$"
	rm -rf "$tmp"
	mkdir -p "$tmp/lib"
	write_pom >"$tmp/pom.xml"
	log "resolving org.apache.kafka:connect-mirror:$VERSION and dependencies with Maven"
	if ! (cd "$tmp" && mvn -B -q -Dmaven.repo.local="$CACHE/m2" \
		dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp/lib" \
		>"$tmp/mvn.log" 2>&1); then
		tail -n 40 "$tmp/mvn.log" >&2 || true
		rm -rf "$tmp"
		die "maven could not resolve connect-mirror $VERSION"
	fi
	find "$tmp/lib" -name 'slf4j-api-1.*.jar' -delete
	find "$tmp/lib" -name 'slf4j-reload4j-*.jar' -delete
	rm -rf "${INSTALL_DIR:?}/lib"
	mv "$tmp/lib" "$INSTALL_DIR/lib"
	mv "$tmp/pom.xml" "$INSTALL_DIR/pom.xml"
	rm -rf "$tmp"
	find "$INSTALL_DIR/lib" -name '*.jar' | LC_ALL=C sort | paste -sd: - >"$CLASSPATH_FILE.new"
	mv "$CLASSPATH_FILE.new" "$CLASSPATH_FILE"
	log "installed MirrorMaker 2 $VERSION in $INSTALL_DIR ($(du -sh "$INSTALL_DIR/lib" | cut -f1) of jars)"
}

case "${1:-}" in
install) cmd_install ;;
classpath)
	cmd_install
	cat "$CLASSPATH_FILE"
	;;
run)
	[[ $# -ge 2 ]] || die "usage: mm2.sh run FILE [ARG...]"
	cmd_install
	shift
	exec java -cp "$(cat "$CLASSPATH_FILE")" org.apache.kafka.connect.mirror.MirrorMaker "$@"
	;;
*)
	sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
	[[ "${1:-}" == -h || "${1:-}" == --help || "${1:-}" == help ]] || exit 2
	;;
esac
