# syntax=docker/dockerfile:1
# The live InFlightOperations server image: `docker build -t <registry>/ifo-apiserver:<tag> .`
# (BuildKit; the cargo registry and target directory are cached between builds).

# The Rust release of `rust-version` in Cargo.toml, on Debian 12 like the runtime image below
# (the same glibc that the binaries link).
ARG RUST_VERSION=1.89
FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src
# Only what the build reads, so edits to manifests, rules or docs keep the build layer. The
# workspace's members are all listed (cargo reads every manifest), but only the server and the
# plugin are built: neither links OpenSSL (only the local-cluster tooling does).
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
COPY apimachinery ./apimachinery
COPY model ./model
COPY plugin ./plugin
COPY devtools ./devtools
COPY test-support ./test-support
# The release profile keeps no debug information (panics still name the functions).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p ifo -p kubectl-ifo --bin ifo-apiserver --bin kubectl-ifo \
 && mkdir -p /out \
 && cp target/release/ifo-apiserver target/release/kubectl-ifo /out/

# glibc and libgcc (what the binaries link), CA certificates, user 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/ifo-apiserver /out/kubectl-ifo /
USER 65532:65532
# In a container the server must listen on every interface, not loopback.
ENV BIND_ADDRESS=0.0.0.0
EXPOSE 8443 9443 8081
ENTRYPOINT ["/ifo-apiserver", "serve"]
