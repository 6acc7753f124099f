#!/usr/bin/env bash
# Start Apache's kafka image with SASL/PLAIN (compose.kafka-sasl.yaml).
#
#   sasl-run.sh DIR [COMMAND...]
#
# The image refuses a SASL_* listener unless KAFKA_OPTS names a JAAS file
# (/etc/kafka/docker/configure: "ub ensure KAFKA_OPTS"). The passwords come from
# the environment, so the JAAS file - and the client properties the healthcheck
# and kafka-acls.sh use - are written here at start, into DIR, readable by the
# broker's user only; they never enter an image or the repository. Then COMMAND
# (the image's /etc/kafka/docker/run) replaces this shell.
set -euo pipefail
dir=${1:?usage: sasl-run.sh DIR [COMMAND...]}
shift
: "${PN_BROKER_ADMIN_PASSWORD:?set PN_BROKER_ADMIN_PASSWORD}"
: "${PN_BROKER_PASSWORD:?set PN_BROKER_PASSWORD}"
: "${PN_READER_PASSWORD:?set PN_READER_PASSWORD}"

# A JAAS string value: backslash and double quote escaped.
quote() { local v=${1//\\/\\\\}; printf '"%s"' "${v//\"/\\\"}"; }

umask 077
mkdir -p "$dir"
cat > "$dir/broker_jaas.conf" <<JAAS
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin"
    password=$(quote "$PN_BROKER_ADMIN_PASSWORD")
    user_admin=$(quote "$PN_BROKER_ADMIN_PASSWORD")
    user_pn_service=$(quote "$PN_BROKER_PASSWORD")
    user_pn_reader=$(quote "$PN_READER_PASSWORD");
};
JAAS
# For the healthcheck and for granting ACLs (kafka-acls.sh --command-config).
cat > "$dir/admin.properties" <<PROPS
security.protocol=SASL_PLAINTEXT
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password=$(quote "$PN_BROKER_ADMIN_PASSWORD" | sed 's/\\/\\\\/g');
PROPS
if [ "$#" -gt 0 ]; then
    exec "$@"
fi
