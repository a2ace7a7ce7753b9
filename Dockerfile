# Steward's GitHub container action: one static binary on an empty image.
# Build stage: compile steward without cgo so it runs FROM scratch.
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -ldflags="-s -w" -o /out/steward ./cmd/steward

# Final stage: the binary and CA certificates (for the model providers' and
# GitHub's HTTPS), nothing else. Dockerfile.prebuilt is the same stage built
# from a binary compiled outside Docker.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/steward /steward
# scratch has no /tmp; WORKDIR creates it (temporary files, the record's WAL).
WORKDIR /tmp
WORKDIR /
ENV TMPDIR=/tmp
# Exec form: steward is PID 1 and receives the runner's SIGINT/SIGTERM itself.
ENTRYPOINT ["/steward"]
CMD ["action"]
