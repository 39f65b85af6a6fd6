# syntax=docker/dockerfile:1
# Build stage: resolve and install the pinned dependencies into a virtualenv.
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python -m venv /opt/venv
COPY pyproject.toml constraints.txt README.md ./
COPY service ./service
COPY plugins ./plugins
COPY policies ./policies
COPY playbooks ./playbooks
RUN /opt/venv/bin/pip install -c constraints.txt ".[aic]"

# Runtime stage: the virtualenv only, run as an unprivileged user.
FROM python:3.11-slim
RUN useradd --create-home --uid 10001 tuner && mkdir -p /var/lib/sglang-tuner && chown tuner /var/lib/sglang-tuner
COPY --from=build /opt/venv /opt/venv
COPY examples /opt/sglang-tuner/examples
ENV PATH="/opt/venv/bin:$PATH" SGLANG_TUNER_DB="sqlite:////var/lib/sglang-tuner/tuner.db"
USER tuner
WORKDIR /var/lib/sglang-tuner
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=20s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status == 200 else 1)"
ENTRYPOINT ["sglang-tuner", "serve"]
CMD ["--host", "0.0.0.0", "--port", "8000"]
