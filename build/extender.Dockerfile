# The extender's image: a static binary (CGO_ENABLED=0) on distroless/static, run as non-root.
#   docker build -f build/extender.Dockerfile --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse HEAD) -t gpushare/extender:<version> .
# `make images` builds the same image without a container engine (hack/tools/image).
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/gpushare/gpushare/pkg/version.Version=${VERSION} -X github.com/gpushare/gpushare/pkg/version.Commit=${COMMIT}" \
      -o /out/extender ./cmd/extender

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=
LABEL org.opencontainers.image.title=extender \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${COMMIT} \
      org.opencontainers.image.source=https://github.com/gpushare/gpushare
COPY --from=build /out/extender /usr/local/bin/extender
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/extender"]
