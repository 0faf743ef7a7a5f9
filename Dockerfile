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
      -o /out/charter ./cmd/charter

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/charter /charter
USER 65532:65532
ENTRYPOINT ["/charter"]
