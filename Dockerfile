# streamrun in a container: the streamrun binary and the example handler
# plugins, on a minimal base. By default it runs the embedded broker on all
# interfaces with its data in /data; run pipelines by giving other
# arguments (plugins are prebuilt under /usr/local/lib/streamrun/plugins,
# since the image has no Go toolchain to build handler packages).
#
#   docker build -t streamrun .
#   docker run -p 6650:6650 -p 8080:8080 -v streamrun-data:/data streamrun
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0
RUN go build -trimpath -o /out/bin/streamrun ./cmd/streamrun && \
    go build -trimpath -o /out/plugins/ ./examples/plugins/...

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/bin/streamrun /usr/local/bin/streamrun
COPY --from=build /out/plugins/ /usr/local/lib/streamrun/plugins/
VOLUME /data
EXPOSE 6650 8080
ENTRYPOINT ["/usr/local/bin/streamrun"]
CMD ["broker", "--listen", "0.0.0.0:6650", "--http", "0.0.0.0:8080", "--data", "/data", "--advertised-host", "localhost"]
