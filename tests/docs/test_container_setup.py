"""compose.yaml, Dockerfile and .dockerignore, checked without Docker (issue 10, item 19).

Docker cannot run here, so the files are read as data and cross-checked
against the code: every ``PN_*`` variable the service gets is a setting the
README documents, ports agree with the settings and the README, the Kafka
SASL recipe carries what Apache's image needs to start, no password has a
default, and nothing secret can reach the build context.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from partition_notify.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
#: Passwords the compose file hands to the brokers' own config, not to our Settings.
BROKER_ONLY = {"PN_READER_PASSWORD", "PN_BROKER_ADMIN_PASSWORD", "PN_POSTGRES_PASSWORD",
               "PN_ACTIVEMQ_BIND"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def compose_text() -> str:
    """Both compose files: the base and the Kafka SASL override."""
    return "\n".join((ROOT / name).read_text()
                     for name in ("compose.yaml", "compose.kafka-sasl.yaml"))


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def test_service_variables_are_settings_the_readme_documents(compose):
    readme = (ROOT / "README.md").read_text()
    env = _env(compose["services"]["partition-notify"])
    assert env, "the partition-notify service sets no variables"
    for name in env:
        assert name.startswith("PN_"), name
        field = name.removeprefix("PN_").lower()
        assert field in Settings.model_fields, f"{name} is not a setting"
        assert name in readme, f"{name} is not in the README"


def test_every_pn_variable_in_the_file_is_known(compose_text):
    readme = (ROOT / "README.md").read_text()
    for name in set(re.findall(r"\bPN_[A-Z_]+\b", compose_text)):
        if name in BROKER_ONLY:
            continue
        assert name.removeprefix("PN_").lower() in Settings.model_fields, name
        assert name in readme, f"{name} is not in the README"


def test_passwords_have_no_default(compose_text):
    # ${VAR:-default} or ${VAR-default} would silently supply a known password.
    found = 0
    for match in re.finditer(r"\$\{(PN_[A-Z_]*PASSWORD)((?::?[-?+][^}]*)?)\}", compose_text):
        name, rest = match.groups()
        found += 1
        assert rest.startswith((":?", "?")), f"${{{name}{rest}}} must be ${{{name}:?...}}"
    assert found >= 6


def test_ports_agree_with_settings_and_readme(compose):
    readme = (ROOT / "README.md").read_text()
    services = compose["services"]
    published = {s: [str(p).rsplit(":", 2)[-2:] for p in svc.get("ports", [])]
                 for s, svc in services.items()}
    for service, port in (("activemq", "61613"), ("kafka", "9092"), ("postgres", "5432")):
        assert [port, port] in published[service], (service, published[service])
        assert port in readme
    env = _env(services["partition-notify"])
    metrics = env["PN_METRICS_PORT"]
    assert f"127.0.0.1:{metrics}/metrics" in " ".join(
        map(str, services["partition-notify"]["healthcheck"]["test"]))
    transport = env["PN_TRANSPORT_URL"]
    assert transport == "stomp://activemq:61613"
    assert f"{env['PN_METRICS_PORT']}" in (ROOT / "Dockerfile").read_text()


def test_stop_grace_period_exceeds_a_clean_stop(compose):
    service = compose["services"]["partition-notify"]
    grace = service.get("stop_grace_period", "10s")
    seconds = float(re.fullmatch(r"(\d+)s", grace).group(1))  # type: ignore[union-attr]
    fields = Settings.model_fields
    # serve stops its jobs, then closes the transport and store; each step is bounded.
    clean = float(fields["publish_timeout_seconds"].default) + float(
        fields["close_timeout_seconds"].default)
    assert seconds > clean, (grace, clean)


def test_kafka_sasl_recipe_is_startable(tmp_path):
    """compose.kafka-sasl.yaml: KAFKA_OPTS names a JAAS file its start script writes."""
    override = yaml.safe_load((ROOT / "compose.kafka-sasl.yaml").read_text())
    kafka = override["services"]["kafka"]
    env = _env(kafka)
    assert "SASL_PLAINTEXT://" in env["KAFKA_LISTENERS"]
    protocols = dict(p.split(":") for p in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert protocols["DOCKER"] == "SASL_PLAINTEXT" and env["KAFKA_SASL_ENABLED_MECHANISMS"]
    jaas = env["KAFKA_OPTS"].split("-Djava.security.auth.login.config=")[1].split()[0]
    # command: bash SCRIPT DIR /etc/kafka/docker/run (the image's own CMD, run last).
    _, script, workdir, run = kafka["command"]
    assert run == "/etc/kafka/docker/run"
    assert jaas == f"{workdir}/broker_jaas.conf"
    source = next(v.split(":")[0] for v in kafka["volumes"] if v.split(":")[1] == script)
    health = " ".join(map(str, kafka["healthcheck"]["test"]))
    assert f"--command-config {workdir}/admin.properties" in health
    # Run the start script as the container would, with a harmless command in place of Kafka.
    import subprocess

    env_vars = {"PATH": "/usr/bin:/bin", "PN_BROKER_ADMIN_PASSWORD": 'ad"m\\in',
                "PN_BROKER_PASSWORD": "svc-pw", "PN_READER_PASSWORD": "rd-pw"}
    out = tmp_path / "pn-kafka"
    done = subprocess.run(["bash", str(ROOT / source), str(out), "echo", "started"],
                          env=env_vars, capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.strip() == "started"
    written = (out / "broker_jaas.conf").read_text()
    assert "KafkaServer {" in written and "PlainLoginModule required" in written
    assert 'user_pn_service="svc-pw"' in written and 'password="ad\\"m\\\\in"' in written
    assert oct((out / "broker_jaas.conf").stat().st_mode & 0o777) == "0o600"
    assert "security.protocol=SASL_PLAINTEXT" in (out / "admin.properties").read_text()
    # Without a password the script refuses to start the broker at all.
    del env_vars["PN_READER_PASSWORD"]
    refused = subprocess.run(["bash", str(ROOT / source), str(tmp_path / "x"), "echo", "started"],
                             env=env_vars, capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and "PN_READER_PASSWORD" in refused.stderr


def test_dockerfile_pins_its_base_and_bakes_no_secret():
    dockerfile = (ROOT / "Dockerfile").read_text()
    args = dict(re.findall(r"^ARG\s+(\w+)=(\S+)", dockerfile, re.M))
    bases = re.findall(r"^FROM\s+(\S+)", dockerfile, re.M)
    assert bases
    for base in bases:
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
        assert re.fullmatch(r"python:3\.\d+\.\d+-slim-[a-z]+@sha256:[0-9a-f]{64}", image), image
    assert not re.search(r"^(ENV|ARG)\s+\S*(PASSWORD|SECRET)", dockerfile, re.M | re.I)
    # The final stage copies only the built wheel, never the source tree.
    final = dockerfile.rsplit("\nFROM ", 1)[1]
    assert "COPY . " not in final


def test_dockerignore_keeps_secrets_and_junk_out_of_the_context():
    ignore = (ROOT / ".dockerignore").read_text().split()
    for entry in (".env", ".venv", ".git", "*.db", "__pycache__"):
        assert any(line.strip("/").startswith(entry) or line == f"**/{entry}"
                   for line in ignore), entry
