# syntax=docker/dockerfile:1
# Build a small static image holding the single charter binary.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/charter-dev/charter/internal/version.Version=${VERSION}" \
      -o /out/charter ./cmd/charter \
 && mkdir -m 1777 /out/tmp

# The same image as hack/image/Dockerfile (`make image`, no registry): an
# empty base, CA certificates, a non-root user and the binary.
FROM scratch
COPY hack/image/passwd hack/image/group /etc/
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/tmp /tmp
COPY --from=build /out/charter /charter
USER 65532:65532
ENTRYPOINT ["/charter"]
