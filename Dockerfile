# streamrun in a container: the streamrun binary and the example handler
# plugins on distroless/static, run as a non-root user. The build is
# scripts/build-release, the same script CI runs (.ci/run step
# release_build), so what the image holds is what CI tested: a static
# (CGO_ENABLED=0), stripped binary stamped with its version and commit.
#
#   docker build -t streamrun \
#     --build-arg STREAMRUN_VERSION=$(git describe --tags --always --dirty) \
#     --build-arg STREAMRUN_COMMIT=$(git rev-parse HEAD) .
#
# The entry point is `streamrun run`; mount the pipeline file at
# /pipelines/pipeline.yaml (or give other files as arguments). The image
# has no Go toolchain, so handlers are binaries: the example plugins are in
# /usr/local/lib/streamrun/plugins (handler: {plugin: /usr/local/lib/streamrun/plugins/uppercase}).
#
#   docker run -v $PWD/pipeline.yaml:/pipelines/pipeline.yaml:ro streamrun --url pulsar://pulsar:6650
#
# The embedded broker, by overriding the entry point. Clients in other
# containers reach it by the name it advertises in lookups:
#
#   docker run -p 6650:6650 -p 8080:8080 -v streamrun-data:/data --entrypoint streamrun streamrun \
#     broker --listen 0.0.0.0:6650 --http 0.0.0.0:8080 --data /data --advertised-host broker
#
# The health check asks the admin API's health endpoint on 127.0.0.1:8080:
# the embedded broker's, which `run` starts there by default (CMD) when the
# file names no service_url. A pipeline on Apache Pulsar has no such port:
# run it with --no-healthcheck (or Kubernetes probes) until `run` serves a
# health endpoint of its own.
#
# A broker with authentication answers the check 401 without a token; the
# image has no shell, so give the check in exec form with a token from the
# environment, e.g. in Compose:
#   healthcheck:
#     test: ["CMD", "/usr/local/bin/streamrun", "health", "--quiet", "--token", "env:STREAMRUN_TOKEN"]
# (and "--url", "https://...", "--tls-ca", "/path/ca.pem" for an admin API on TLS).

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG STREAMRUN_VERSION=devel
ARG STREAMRUN_COMMIT=
RUN STREAMRUN_VERSION="$STREAMRUN_VERSION" STREAMRUN_COMMIT="$STREAMRUN_COMMIT" scripts/build-release /out && \
    mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bin/streamrun /usr/local/bin/streamrun
COPY --from=build /out/plugins/ /usr/local/lib/streamrun/plugins/
# A new named volume takes /data's owner from the image: nonroot.
COPY --from=build --chown=nonroot:nonroot /out/data /data
USER nonroot:nonroot
WORKDIR /home/nonroot
VOLUME /data
EXPOSE 6650 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/streamrun", "health", "--quiet"]
ENTRYPOINT ["/usr/local/bin/streamrun", "run"]
CMD ["--broker-http=127.0.0.1:8080", "/pipelines/pipeline.yaml"]
