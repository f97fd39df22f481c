#!/usr/bin/env bash
# Assembles the headers of one CANN release from its public sources, laid out as an installation's
# $ASCEND_HOME_PATH/include, for the header check (python3 -m esgraph cann-headers --cann-include OUT;
# docs/ascend.md records the results):
#   acl/, ge/  AscendCL        hicann/runtime  include/external
#   aclnn/     aclnn's base    hicann/opbase   include/nnopbase/aclnn (hicann/runtime src/inc/external/aclnn
#                                              in 8.5)
#   aclnnop/   the aclnn ops   hicann/ops-nn, hicann/ops-math: every op_api/aclnn_*.h
#   hccl/      HCCL            hicann/hccl include/hccl.h; hicann/hcomm include/hccl/ (types, comm)
#
#   scripts/cann-headers.sh TAG OUT [SOURCES]
# SOURCES holds a git repository per name above (runtime, opbase, ops-nn, ops-math, hccl, hcomm), bare or
# not; a missing one is cloned there from github.com/hicann (default SOURCES: ~/.cache/esgraph/cann-src).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
tag=$1 out=$2 sources=${3:-$HOME/.cache/esgraph/cann-src}
mkdir -p "$sources" "$out"
git_of() {  # the git directory of source $1, cloned when missing
  local dir="$sources/$1"
  [ -e "$dir" ] || git clone -q --bare --filter=blob:none "https://github.com/hicann/$1.git" "$dir"
  if [ -d "$dir/.git" ]; then echo "$dir/.git"; else echo "$dir"; fi
}
# extract REPO PATTERN DEST [PREFIX]: the files of REPO at $tag whose paths match PATTERN into
# $out/DEST, by their paths below PREFIX (by their names when there is none).
extract() {
  local g; g=$(git_of "$1")
  git --git-dir="$g" rev-parse -q --verify "$tag^{commit}" >/dev/null || { echo "$1 has no tag $tag" >&2; exit 1; }
  local files; files=$(git --git-dir="$g" ls-tree -r --name-only "$tag" | grep -E "$2" || true)
  [ -n "$files" ] || { echo "  $1 $tag: nothing matches $2" >&2; return 0; }
  echo "$files" | while read -r f; do
    local to="$out/$3/${4:+${f#"$4"}}"
    [ -n "${4:-}" ] || to="$out/$3/$(basename "$f")"
    mkdir -p "$(dirname "$to")"
    git --git-dir="$g" show "$tag:$f" > "$to"
  done
}
extract runtime '^include/external/.+\.h$' . include/external/
extract runtime '^src/inc/external/aclnn/[^/]+\.h$' aclnn
extract opbase '^include/nnopbase/aclnn/[^/]+\.h$' aclnn
extract ops-nn '(^|/)op_api/aclnn_[^/]+\.h$' aclnnop
extract ops-math '(^|/)op_api/aclnn_[^/]+\.h$' aclnnop
extract hccl '^include/hccl\.h$' hccl
extract hcomm '^include/hccl/[^/]+\.h$' hccl
echo "CANN $tag headers in $out: $(find "$out" -name '*.h' | wc -l) files"
