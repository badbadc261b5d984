#!/usr/bin/env bash
# Fetches the CRDs that tests/k8s.rs validates gpustack's custom resources against, at a
# project's release tag, from its public repository (raw.githubusercontent.com), and writes
# them unchanged into fixtures/schemas/ under versioned names (`<upstream name>.<tag>.yaml`).
# It prints the rows to paste into fixtures/schemas/README.md: one per file (name, kind,
# URL at the tag, sha256) and the tag's commit (`git ls-remote`).
#
# usage: scripts/update-schemas.sh [--out DIR] PROJECT=TAG...
#   PROJECT is one of: trainer lws kueue prometheus-operator network-operator training-operator
#   e.g.   scripts/update-schemas.sh kueue=v0.20.1 lws=v0.11.0
#
# It changes nothing else. Then: point crd_of in tests/k8s.rs at the new names, replace the
# rows in the README, delete the old release's files, and run
# `cargo test --test k8s --test schemas_vendored` (book/src/catalog.md, "Maintainer workflow:
# refreshing the vendored CRD schemas"). Needs curl, git and sha256sum, and GitHub.
set -euo pipefail

# The files of each project, as `PATH-IN-THE-REPOSITORY KIND`, at the layout of the pinned
# releases (fixtures/schemas/README.md). A release that moves a file fails the download,
# loudly: look the file up at the new tag and change the path here.
repo_of() {
  case "$1" in
    trainer) echo kubeflow/trainer ;;
    lws) echo kubernetes-sigs/lws ;;
    kueue) echo kubernetes-sigs/kueue ;;
    prometheus-operator) echo prometheus-operator/prometheus-operator ;;
    network-operator) echo Mellanox/network-operator ;;
    training-operator) echo kubeflow/training-operator ;;
    *) return 1 ;;
  esac
}

files_of() {
  case "$1" in
    trainer)
      echo "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml TrainJob"
      echo "manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml TrainingRuntime"
      ;;
    lws)
      echo "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml LeaderWorkerSet"
      ;;
    kueue)
      echo "config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml ClusterQueue"
      echo "config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml LocalQueue"
      echo "config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml ResourceFlavor"
      echo "config/components/crd/bases/kueue.x-k8s.io_topologies.yaml Topology"
      ;;
    prometheus-operator)
      echo "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml ServiceMonitor"
      echo "example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml PodMonitor"
      ;;
    network-operator)
      echo "config/crd/bases/mellanox.com_nicclusterpolicies.yaml NicClusterPolicy"
      echo "config/crd/bases/mellanox.com_ipoibnetworks.yaml IPoIBNetwork"
      echo "config/crd/bases/mellanox.com_macvlannetworks.yaml MacvlanNetwork"
      echo "manifests/state-nv-ipam-cni/005-nv-ipam.nvidia.com_ippools.yaml IPPool (nv-ipam)"
      ;;
    training-operator)
      echo "manifests/base/crds/kubeflow.org_pytorchjobs.yaml PyTorchJob"
      ;;
  esac
}

usage() {
  sed -n '8,10p' "$0" >&2
  exit 2
}

out=fixtures/schemas
case "${1:-}" in
  --out)
    out=${2:?--out needs a directory}
    shift 2
    ;;
  -h | --help | "") usage ;;
esac
[[ $# -gt 0 ]] || usage
[[ -d $out ]] || { echo "no directory $out (run from the repository root, or give --out)" >&2; exit 2; }

# Check every argument before fetching anything.
for arg in "$@"; do
  project=${arg%%=*}
  tag=${arg#*=}
  if [[ $arg != *=* || -z $tag ]] || ! repo_of "$project" >/dev/null; then
    echo "not PROJECT=TAG with a known PROJECT: $arg" >&2
    usage
  fi
done

rows=()
tags=()
tmp=
trap 'rm -f "$tmp"' EXIT
for arg in "$@"; do
  project=${arg%%=*}
  tag=${arg#*=}
  repo=$(repo_of "$project")
  # The commit the tag names: the peeled `^{}` line of an annotated tag, else the tag's own.
  refs=$(git ls-remote --tags "https://github.com/$repo.git" "refs/tags/$tag" "refs/tags/$tag^{}")
  commit=$(awk -v t="refs/tags/$tag" '$2 == t "^{}" { p = $1 } $2 == t { c = $1 } END { print (p != "" ? p : c) }' <<<"$refs")
  [[ -n $commit ]] || { echo "$repo has no tag $tag" >&2; exit 1; }
  tags+=("| $repo | $tag | \`$commit\` |")
  while read -r path kind; do
    url="https://raw.githubusercontent.com/$repo/$tag/$path"
    base=${path##*/}
    base=${base#[0-9][0-9][0-9]-} # 005-nv-ipam.nvidia.com_ippools.yaml: the ordering prefix
    name="${base%.yaml}.$tag.yaml"
    tmp=$(mktemp "$out/.update-schemas.XXXXXX")
    if ! curl -fsSL --retry 3 -o "$tmp" "$url"; then
      echo "cannot fetch $url (did the release move the file? see files_of in $0)" >&2
      exit 1
    fi
    if ! grep -q '^kind: CustomResourceDefinition' "$tmp"; then
      echo "$url is not a CustomResourceDefinition" >&2
      exit 1
    fi
    mv "$tmp" "$out/$name"
    tmp=
    sha=$(sha256sum "$out/$name" | cut -d' ' -f1)
    echo "wrote $out/$name" >&2
    rows+=("| \`$name\` | $kind | <$url> | \`$sha\` |")
  done < <(files_of "$project")
done

echo
echo "Rows for the file table of fixtures/schemas/README.md:"
printf '%s\n' "${rows[@]}"
echo
echo "Rows for its tags table:"
printf '%s\n' "${tags[@]}"
