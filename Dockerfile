# syntax=docker/dockerfile:1
# Static, non-root image of restart-controller (and its kubectl plugin, the operator CLI).
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) -t restart-controller .
# `make image` builds the same image without a Docker engine (hack/image, FROM
# scratch plus passwd, group and CA certificates); hack/image/dockerfile_test.go
# keeps this file and that image in agreement on user, entrypoint, port and labels.

# Base images are pinned by digest, so a build cannot change under a moved
# tag. To update: crane digest golang:1.26; crane digest
# gcr.io/distroless/static-debian12:nonroot (the tags are kept for reading).
FROM golang:1.26@sha256:595c7847cff97c9a9e76f015083c481d26078f961c9c8dca3923132f51fe12f1 AS build
WORKDIR /src
# Dependencies first, in their own layer, so code changes do not re-download them.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY cmd/ cmd/
COPY internal/ internal/
ARG VERSION=dev
# The controller and the operator CLI are separate binaries: the CLI's
# libraries (cli-runtime, kustomize) would double the controller's size and memory.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/restart-controller ./cmd/restart-controller && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/kubectl-restart_controller ./cmd/kubectl-restart_controller

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="restart-controller" \
      org.opencontainers.image.source="https://github.com/restart-controller/restart-controller" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/restart-controller /restart-controller
COPY --from=build /out/kubectl-restart_controller /kubectl-restart_controller
USER 65532:65532
EXPOSE 10254
ENTRYPOINT ["/restart-controller"]
