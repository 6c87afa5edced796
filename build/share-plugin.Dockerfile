# The device plugin's image. go-nvml loads libnvidia-ml.so.1 with dlopen, so the binary is
# built with cgo against glibc and runs on distroless/base (glibc, nothing else); the NVIDIA
# container runtime mounts the driver's library in at run time. The image's user is non-root;
# the DaemonSet runs it as root because the kubelet's device-plugin folder is root's.
#   docker build -f build/share-plugin.Dockerfile --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse HEAD) -t gpushare/share-plugin:<version> .
# TAGS=fakenvml builds the mock-GPU variant used by the end-to-end tests.
# `make images` builds the same image without a container engine (hack/tools/image).
# HAMi-core's libvgpu.so (docs/hami-core.md) is built in a stage of its own by hack/hami-core.sh
# at the commit pinned there; --build-arg HAMI_CORE_COMMIT=<full hash> builds another. The stage
# runs on the CUDA image HAMi-core builds on (UBI 8, glibc 2.28, CUDA 13.3; HAMi-core needs CUDA
# 12.5 or newer headers): the library is preloaded into the workload containers, and a process
# whose glibc is older than the one the library was linked against does not start at all.
ARG GO_VERSION=1.26
ARG HAMI_CORE_BUILD_IMAGE=nvidia/cuda:13.3.0-cudnn-devel-ubi8
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

FROM ${HAMI_CORE_BUILD_IMAGE} AS hami-core
RUN dnf install -y cmake git make tar && dnf clean all
COPY hack/hami-core.sh /usr/local/bin/hami-core.sh
# Empty unless given: hack/hami-core.sh then builds its own pin.
ARG HAMI_CORE_COMMIT=
RUN HAMI_CORE_MAX_GLIBC=2.28 bash /usr/local/bin/hami-core.sh /out/libvgpu.so

FROM gcr.io/distroless/base-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=
LABEL org.opencontainers.image.title=share-plugin \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${COMMIT} \
      org.opencontainers.image.source=https://github.com/gpushare/gpushare
COPY --from=build /out/share-plugin /usr/local/bin/share-plugin
# The plugin copies it onto the host at start (--hami-core-install-from), for the kubelet to
# mount into containers; the host's folder is mounted at /usr/local/gpushare/hami-core, so the
# image's copy lives elsewhere.
COPY --from=hami-core /out/libvgpu.so /opt/gpushare/hami-core/libvgpu.so
COPY LICENSE NOTICE /usr/share/doc/gpushare/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/share-plugin"]
