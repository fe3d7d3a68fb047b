# The KRM function as a kpt `image:` (kpt fn eval --image, or a Kptfile
# pipeline). A static musl binary on distroless; the entrypoint reads a
# ResourceList on stdin. Build: docker build -t ghcr.io/nvidia/kubectl-nvcf-worker:v0.1.0 .
# Not built in this repository's tests (see docs/install.md).

FROM rust:1.95-alpine AS build
# On Alpine the host target is *-unknown-linux-musl, which links statically;
# gcc and musl-dev build ring's C and assembly.
RUN apk add --no-cache gcc musl-dev
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin kubectl-nvcf-worker

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/target/release/kubectl-nvcf-worker /usr/local/bin/kubectl-nvcf-worker
COPY LICENSE /usr/share/doc/kubectl-nvcf-worker/LICENSE
USER nonroot
ENTRYPOINT ["/usr/local/bin/kubectl-nvcf-worker"]
