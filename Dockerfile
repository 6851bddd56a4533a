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
# The entry point is `streamrun run --telemetry-addr=127.0.0.1:9464`; its
# argument (CMD) is the pipeline file, /pipelines/pipeline.yaml: mount
# yours there, or give flags and files as arguments (which replace CMD).
# The image has no Go toolchain, so handlers are binaries: the example
# plugins are in /usr/local/lib/streamrun/plugins
# (handler: {plugin: /usr/local/lib/streamrun/plugins/uppercase}).
#
#   docker run -v $PWD/pipeline.yaml:/pipelines/pipeline.yaml:ro streamrun
#   docker run -v $PWD/pipeline.yaml:/pipelines/pipeline.yaml:ro streamrun \
#     --url pulsar://pulsar:6650 /pipelines/pipeline.yaml
#
# The health check asks the run's own readiness endpoint, /readyz on the
# telemetry listener (loopback only: nothing leaves the container), in
# every case: against Apache Pulsar, and with the embedded broker the run
# starts when the file names no service_url. Healthy once every pipeline
# consumes; unhealthy while the broker cannot be reached, while a handler
# keeps crashing, or once the run stopped (docs/telemetry.md). A
# --telemetry-addr of your own (for Prometheus to scrape, say) moves the
# listener, the last one given winning: give the check the same address.
# The image has no shell, so a check of your own takes the exec form (as
# in Compose; `docker run --health-cmd` needs a shell), e.g.
#   healthcheck:
#     test: ["CMD", "/usr/local/bin/streamrun", "health", "--quiet", "--url", "http://127.0.0.1:9090/readyz"]
#
# The embedded broker on its own, by overriding the entry point. Clients in
# other containers reach it by the name it advertises in lookups. The
# image's check asks a run's endpoint, so give the broker its own: its
# admin API's health, `streamrun health`'s default URL (in Compose:
# test: ["CMD", "/usr/local/bin/streamrun", "health", "--quiet"]; a
# broker with authentication wants "--token", "env:STREAMRUN_TOKEN" too),
# or none (--no-healthcheck):
#
#   docker run --no-healthcheck -p 6650:6650 -p 8080:8080 -v streamrun-data:/data --entrypoint streamrun streamrun \
#     broker --listen 0.0.0.0:6650 --http 0.0.0.0:8080 --data /data --advertised-host broker

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
# Handlers start, and the broker is reached, within the start period.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/streamrun", "health", "--quiet", "--url", "http://127.0.0.1:9464/readyz"]
ENTRYPOINT ["/usr/local/bin/streamrun", "run", "--telemetry-addr=127.0.0.1:9464"]
CMD ["/pipelines/pipeline.yaml"]
