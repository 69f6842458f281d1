# distdeck: the deck and its simulator, CPU only.
#   docker build -t distdeck .
#   docker run -p 8000:8000 distdeck      -> http://localhost:8000
# The same two steps as `make install`: npm packages copied into static/vendor, then a Python
# environment with CPU torch 2.13.0 and the package.

# ---- front end: npm packages -> static/vendor ----
FROM node:22-bookworm-slim AS vendor
WORKDIR /build
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY scripts/vendor.sh scripts/vendor.sh
RUN sh scripts/vendor.sh node_modules static/vendor

# ---- the server ----
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
# CPU wheel of torch first (its own index), so `pip install .` finds the pin satisfied
# instead of pulling the default CUDA build.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
COPY app app
COPY simulations simulations
# Editable, as `make install` does: the package runs from /app, next to its templates,
# slides/ and static/ (a plain install would leave app/templates behind).
RUN pip install -e .
COPY slides slides
COPY static static
COPY --from=vendor /build/static/vendor static/vendor
RUN useradd --create-home --uid 10001 distdeck
USER 10001
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]
CMD ["distdeck", "serve", "--host", "0.0.0.0", "--port", "8000"]
