# The device plugin's image. go-nvml loads libnvidia-ml.so.1 with dlopen, so the binary is
# built with cgo against glibc and runs on distroless/base (glibc, nothing else); the NVIDIA
# container runtime mounts the driver's library in at run time. The image's user is non-root;
# the DaemonSet runs it as root because the kubelet's device-plugin folder is root's.
#   docker build -f build/share-plugin.Dockerfile --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse HEAD) -t gpushare/share-plugin:<version> .
# TAGS=fakenvml builds the mock-GPU variant used by the end-to-end tests.
# `make images` builds the same image without a container engine (hack/tools/image).
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=
ARG TAGS=
RUN CGO_ENABLED=1 go build -trimpath -buildvcs=false -tags "${TAGS}" \
      -ldflags "-s -w -X github.com/gpushare/gpushare/pkg/version.Version=${VERSION} -X github.com/gpushare/gpushare/pkg/version.Commit=${COMMIT}" \
      -o /out/share-plugin ./cmd/share-plugin

FROM gcr.io/distroless/base-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=
LABEL org.opencontainers.image.title=share-plugin \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${COMMIT} \
      org.opencontainers.image.source=https://github.com/gpushare/gpushare
COPY --from=build /out/share-plugin /usr/local/bin/share-plugin
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/share-plugin"]
