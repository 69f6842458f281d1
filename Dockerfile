# distdeck: the deck and its simulator, CPU only, on Debian's own base image.
#   docker build -t distdeck .
#   docker run -p 8000:8000 distdeck      -> http://localhost:8000
#   docker run -p 8000:8000 -v $PWD/talks:/talks:ro -e DISTDECK_TALK_FILE=/talks/talk.md distdeck   -> your own talk
# `make image` does the same with docker or podman (scripts/image.sh). The same steps as `make install`:
# npm packages copied into static/vendor, then a Python environment with CPU torch 2.13.0 and the package.
# Three stages, so that Node and the build's downloads stay behind: only the venv, the code and the
# vendored files reach the image. Slides and static files are copied last: editing them rebuilds in seconds.

# ---- front end: npm packages -> static/vendor (Debian's Node; it stays in this stage) ----
FROM debian:bookworm-slim AS vendor
# Debian's own versions of a stable release: pinning them would break at each security update.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY package.json package-lock.json ./
# The vendored packages only: the dev tools (Lighthouse, for `make bench`) stay out of the build.
RUN npm ci --omit=dev --no-audit --no-fund
COPY scripts/vendor.sh scripts/vendor.sh
RUN sh scripts/vendor.sh node_modules static/vendor

# ---- Python dependencies: a venv with CPU torch, in a stage of its own (pip's downloads stay here) ----
FROM debian:bookworm-slim AS python
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv
# The CPU build of torch, by its full version (2.13.0+cpu) from PyTorch's CPU index: never the CUDA build
# that the plain name gets from PyPI. `make image` passes another index only where this machine's pip has
# the same wheel in a local folder. The GPU image (README) asks for PyPI's CUDA build instead.
ARG TORCH=torch==2.13.0+cpu
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN /opt/venv/bin/pip install --index-url "$TORCH_INDEX_URL" "$TORCH"
# The package's other dependencies, read from pyproject.toml (torch==2.13.0 is met by 2.13.0+cpu), and the
# setuptools that installs the package later without a network.
COPY pyproject.toml /tmp/pyproject.toml
RUN /opt/venv/bin/python -c "import tomllib; print('\n'.join(tomllib.load(open('/tmp/pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && /opt/venv/bin/pip install -r /tmp/requirements.txt "setuptools>=68"

# ---- the server ----
FROM debian:bookworm-slim
# tini as PID 1: it forwards SIGTERM to the server, which closes its rank pool, and reaps any rank
# process orphaned on the way (a Python PID 1 would leave them as zombies).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 tini \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 distdeck
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=python /opt/venv /opt/venv
WORKDIR /app
COPY pyproject.toml README.md ./
COPY app app
COPY simulations simulations
# Editable, as `make install` does: the package runs from /app, next to its templates, slides/ and static/
# (a plain install would leave app/templates behind). Offline: every dependency is in the venv already.
RUN pip install --no-deps --no-build-isolation -e .
COPY slides slides
COPY static static
COPY --from=vendor /build/static/vendor static/vendor
USER 10001
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]
ENTRYPOINT ["tini", "--"]
CMD ["distdeck", "serve", "--host", "0.0.0.0", "--port", "8000"]
