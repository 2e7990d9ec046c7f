#!/usr/bin/env bash
# The whole test suite: formatting, lints, docs, unit/integration tests, the examples, loom
# models.
# Installs what it needs on a fresh machine (a Rust toolchain with clippy and rustfmt).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/deps.sh
rustup component add clippy rustfmt >/dev/null 2>&1 || true


step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy --all-targets --all-features -D warnings"
cargo clippy --workspace --all-targets --all-features --quiet -- -D warnings
step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
step "cargo test (all features: the test-only protocol shortcuts of the negative tests are on)"
cargo test --workspace --all-features --quiet 2>&1 | tee target/test-output.txt
step "examples (cargo run --example NAME: each checks what it shows and fails otherwise)"
cargo run --quiet --example bank -- 300
cargo run --quiet --example snapshot -- 300
kv_dir="$(mktemp -d)"
cargo run --quiet --example durable_kv -- demo "$kv_dir/db" 2
rm -rf "$kv_dir"
step "loom models"
# The loom models need speed, not the release profile's LTO (minutes of linking).
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
  cargo test --release --quiet -p ordo-clock -p ordo -p ordo-apps --test 'loom*' 2>&1 |
  tee target/loom-output.txt
echo
echo "all checks passed"
