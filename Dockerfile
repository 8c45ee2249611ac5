# Vela API image: CPU-only torch, the pinned dependency set, the project; runs as a non-root user.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    VELA_DATA_DIR=/data

WORKDIR /app

# 1. torch first, from the PyTorch CPU index: anything else pulls the multi-GB CUDA build.
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0

# 2. the full pinned set (its own layer, so code changes do not reinstall it).
COPY requirements.lock ./
RUN pip install -r requirements.lock

# 3. the project itself (dependencies are already there).
COPY pyproject.toml ./
COPY models ./models
COPY indexing ./indexing
COPY service ./service
COPY training ./training
COPY cli ./cli
COPY bench ./bench
COPY velaio ./velaio
COPY client ./client
# vela-client too: `vela snapshot` talks to a server through it.
RUN pip install --no-deps . ./client && rm -rf build *.egg-info client/build client/*.egg-info

RUN useradd --create-home --uid 10001 vela \
    && mkdir -p /data \
    && chown vela:vela /data
USER vela

VOLUME ["/data"]
EXPOSE 8000

CMD ["vela", "serve", "--host", "0.0.0.0", "--port", "8000"]
