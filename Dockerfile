# partition-notify service image (relay, retention purge, health jobs).
#   docker build -t partition-notify .
#   docker run --rm -e PN_STORE_URL=... -e PN_TRANSPORT_URL=stomp://broker:61613 partition-notify
# Secrets (PN_BROKER_PASSWORD, store URL passwords) are passed at run time, never
# built in; .dockerignore keeps .env, .venv, .git and *.db out of the context.

# Pinned by version and digest (the multi-platform index of the official image,
# as published for this tag). Refresh both together:
#   docker buildx imagetools inspect python:3.11.13-slim-bookworm
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:86adf8dbadc3d6e82ee5dd2c74bec2e1c2467cdad47886280501df722372d2e1

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# The wheel carries the Spark commit-protocol jar, compiled by setup.py: a JDK
# and pyspark's jars (PN_BUILD_PYTHON) in this stage only.
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless \
    && rm -rf /var/lib/apt/lists/* \
    && pip install "pyspark>=4.0,<5"
WORKDIR /src
COPY . /src
# Only the wheel leaves this stage: the sources never reach a layer of the final image.
RUN PN_BUILD_PYTHON=/usr/local/bin/python pip wheel --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN pip install "$(ls /wheels/*.whl)[http,stomp,kafka,postgres]" \
    && rm -rf /wheels \
    && useradd --system --home-dir /var/lib/partition-notify --create-home partition-notify

USER partition-notify
WORKDIR /var/lib/partition-notify

# Prometheus metrics (bound to 127.0.0.1 inside the container; used by the healthcheck).
ENV PN_METRICS_PORT=9108
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD python -c "import sys, urllib.request; b = urllib.request.urlopen('http://127.0.0.1:9108/metrics', timeout=4).read(); sys.exit(0 if b'pn_store_up 1.0' in b else 1)"

# serve stops on SIGTERM: jobs finish, then the transport and store close within
# PN_CLOSE_TIMEOUT_SECONDS; compose.yaml's stop_grace_period leaves room for that.
CMD ["partition-notify", "serve"]
