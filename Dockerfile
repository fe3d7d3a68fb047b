# The KRM function as a kpt `image:` (kpt fn eval --image, or a Kptfile
# pipeline). A static musl binary on distroless; the entrypoint reads a
# ResourceList on stdin; the deploy/ CronJobs run it too. No image is published:
# build and push your own (docs/install.md, "Container image"). Not built by
# this repository's tests.

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
