# ml_server in a container: a static build of one ISA preset, in an image with nothing else,
# running as a non-root user; the model is mounted read-only (docs/deploy.md).
#   docker build --build-arg ISA=avx2 -t krafla:avx2 .
#   docker run --rm -p 8080:8080 -v "$PWD/models:/models:ro" krafla:avx2 -m /models/model.mlb
ARG ISA=avx2

FROM debian:bookworm AS build
ARG ISA
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake ninja-build g++ pkg-config libcli11-dev \
      libfmt-dev nlohmann-json3-dev dpkg-dev ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# cpp-httplib's whole header from Debian's source package, so that ml_server links statically.
RUN scripts/fetch_httplib.sh \
 && cmake --preset "${ISA}" -DKRAFLA_BUILD_TESTS=OFF -DKRAFLA_BUILD_BENCHMARKS=OFF \
 && cmake --build "build/${ISA}" --target ml_server ml_run ml_tok ml_bench \
 && mkdir /out && for b in ml_server ml_run ml_tok ml_bench; do strip -o "/out/$b" "build/${ISA}/$b"; done

FROM scratch
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/ml_server", "--host", "0.0.0.0", "--port", "8080"]
CMD ["-m", "/models/model.mlb"]
