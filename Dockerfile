# mt-server image: a builder stage makes a virtual environment, a slim runtime stage runs it as non-root.
#
#   CPU (default):  docker build -t mt-server:cpu .
#   CUDA:           docker build -t mt-server:cuda \
#                     --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu130 .
#
# The CUDA build of torch brings its CUDA libraries as wheels, so the same slim base serves both; the
# host needs only the NVIDIA driver and the NVIDIA Container Toolkit. torch's version comes from
# constraints.txt either way. See docs/deployment.md.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
# Index that serves torch: the CPU wheels by default, a CUDA index (cu130, ...) for the GPU image.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# Optional, for a build without the PyTorch index or behind a TLS-inspecting proxy (docs/deployment.md): a wheel
# directory or URL pip also looks in, and the CA bundle pip trusts. Empty: pip's own defaults.
ARG PIP_FIND_LINKS=""
ARG PIP_CERT=""
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src

# torch first, in its own layer: it is the largest and changes least. constraints.txt pins its version.
COPY constraints.txt ./
RUN pip install --no-cache-dir --index-url "${TORCH_INDEX_URL}" --extra-index-url https://pypi.org/simple \
        -c constraints.txt torch

# The project itself, runtime dependencies only (no test extras).
COPY pyproject.toml README.md ./
COPY app ./app
COPY model ./model
RUN pip install --no-cache-dir -c constraints.txt .

# The built-in model must sit inside the installed `model` package (in the venv, not /src: hence -I), where
# the server looks for it when no --model is given. Copy it there whether or not the package data already
# carried it, then check.
RUN pkg="$(python -I -c 'import importlib.util as u, os; print(os.path.dirname(u.find_spec("model").origin))')" \
    && mkdir -p "${pkg}/builtin" \
    && cp -a model/builtin/. "${pkg}/builtin/" \
    && test -f "${pkg}/builtin/en-es/config.json"

# Cut what the server never runs (about 270 MB; docs/deployment.md): the test suites and C/C++ headers of the
# installed packages, torch's C++ test programs, test libraries and protoc, static libraries, type stubs (.pyi), and
# pip and setuptools (nothing is installed at run time). The compiled bytecode stays: it makes a cold start faster.
RUN site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    && rm -rf "${site}/torch/test" "${site}/torch/include" "${site}"/torch/bin/test_* "${site}"/torch/bin/*Test \
        "${site}"/torch/bin/protoc* "${site}"/torch/lib/lib*_test.so \
    && find "${site}" -depth -type d -name tests -exec rm -rf {} + \
    && find "${site}" -type f \( -name '*.a' -o -name '*.h' -o -name '*.hpp' -o -name '*.pyi' \) -delete \
    && python -m pip uninstall -y -q pip setuptools


# The Spanish and English analysers' files, unpacked from Debian's package without installing Apertium (see the runtime stage).
FROM ${PYTHON_IMAGE} AS analyser
WORKDIR /tmp/deb
RUN apt-get update \
    && apt-get download apertium-eng-spa=0.8.1-2 \
    && dpkg-deb -x apertium-eng-spa_*.deb unpacked \
    && mkdir -p /analyser/usr/share/apertium/apertium-eng-spa /analyser/usr/share/doc/apertium-eng-spa \
    && cp unpacked/usr/share/apertium/apertium-eng-spa/spa-eng.automorf.bin /analyser/usr/share/apertium/apertium-eng-spa/ \
    && cp unpacked/usr/share/apertium/apertium-eng-spa/eng-spa.automorf.bin /analyser/usr/share/apertium/apertium-eng-spa/ \
    && cp unpacked/usr/share/doc/apertium-eng-spa/copyright /analyser/usr/share/doc/apertium-eng-spa/ \
    && rm -rf /var/lib/apt/lists/*

FROM ${PYTHON_IMAGE} AS runtime
ARG UID=10001
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/home/mt \
    XDG_CACHE_HOME=/tmp/.cache \
    TORCHINDUCTOR_CACHE_DIR=/tmp/.cache/torchinductor \
    TRITON_CACHE_DIR=/tmp/.cache/triton

# Debian's Spanish morphological analyser (Apertium's lt-proc, run as its own program): the gender of a glossary's
# Spanish terms that the model does not know ("un ventanal", "la sartén"), and which plural of a term is a noun
# ("the updates", not "allows"). Only lt-proc (lttoolbox) and the two analyser files of apertium-eng-spa (with its
# copyright), not Apertium itself: about 40 MB. Without them the model and the word's ending decide
# (app/glossaries/lexicon.py, plurals.py).
COPY --from=analyser /analyser/ /
RUN apt-get update \
    && apt-get install -y --no-install-recommends lttoolbox=3.7.1-1+b2 \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/*

# A fixed numeric uid/gid so Kubernetes can check runAsNonRoot; /models is where user models are mounted
# (read-only is enough). No VOLUME instruction: an unmounted /models should not leave anonymous volumes.
RUN groupadd --system --gid "${UID}" mt \
    && useradd --system --uid "${UID}" --gid mt --home-dir /home/mt --create-home --shell /usr/sbin/nologin mt \
    && mkdir -p /models \
    && chown mt:mt /models

COPY --from=builder /opt/venv /opt/venv
COPY deploy/docker/healthcheck.py /usr/local/bin/mt-healthcheck

WORKDIR /home/mt
USER ${UID}:${UID}
EXPOSE 8000

# The server drains on SIGTERM (readiness turns 503, in-flight requests finish within MT_DRAIN_SECONDS).
# Exec form: python itself is PID 1 (no shell in between), so the signal reaches the server.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "/usr/local/bin/mt-healthcheck"]

ENTRYPOINT ["python", "-m", "app"]
CMD ["--host", "0.0.0.0", "--port", "8000"]
