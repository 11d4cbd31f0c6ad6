# syntax=docker/dockerfile:1
# Static, non-root image of restart-controller.
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t restart-controller .

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, in their own layer, so code changes do not re-download them.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY cmd/ cmd/
COPY internal/ internal/
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/restart-controller ./cmd/restart-controller

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/restart-controller /restart-controller
USER 65532:65532
EXPOSE 10254
ENTRYPOINT ["/restart-controller"]
