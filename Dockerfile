# partition-notify service image (relay, retention purge, health jobs).
#   docker build -t partition-notify .
#   docker run --rm -e PN_STORE_URL=... -e PN_TRANSPORT_URL=stomp://broker:61613 partition-notify
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY . /src
RUN pip install '.[http]' \
    && useradd --system --home-dir /var/lib/partition-notify --create-home partition-notify \
    && rm -rf /src

USER partition-notify
WORKDIR /var/lib/partition-notify

# Prometheus metrics (bound to 127.0.0.1 inside the container; used by the healthcheck).
ENV PN_METRICS_PORT=9108
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD python -c "import sys, urllib.request; b = urllib.request.urlopen('http://127.0.0.1:9108/metrics', timeout=4).read(); sys.exit(0 if b'pn_store_up 1.0' in b else 1)"

CMD ["partition-notify", "serve"]
