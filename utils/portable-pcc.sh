#!/usr/bin/env bash
# Packs build/bin/pcc for a machine without LLVM, MLIR, ONNX or Open MPI
# installed (such as a GPU machine lent for a short check): relinks pcc
# from the build's own objects against LLVM's and MLIR's static archives
# (ld.lld, unused sections dropped, stripped) and bundles the shared
# libraries it still needs, other than the C and C++ runtimes, beside it.
#
#   bash utils/portable-pcc.sh OUT.txz
#
# OUT.txz unpacks to pcc-portable/pcc and pcc-portable/lib/ (found through
# the binary's RUNPATH, $ORIGIN/lib). Needs a configured and built build/
# ($PCC_BUILD_DIR) and the static archives of the llvm-22 packages.
set -euo pipefail
out=${1:?usage: bash utils/portable-pcc.sh OUT.txz}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PCC_BUILD_DIR:-$root/build}
llvm=$(dirname "$(dirname "$(readlink -f "$(command -v llvm-config-22 || echo /usr/lib/llvm-22/bin/llvm-config)")")")
ninja -C "$build" bin/pcc >/dev/null
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/pcc-portable/lib"
# The build's own link command, with the shared LLVM and MLIR libraries
# replaced by their archives (only the members pcc uses are pulled in).
cmd=$(ninja -C "$build" -t commands bin/pcc | tail -1)
python3 - "$cmd" "$stage/pcc-portable/pcc" "$llvm/lib" > "$stage/link.sh" <<'PY'
import re, sys
cmd, dest, lib = sys.argv[1:]
archives = (f"-Wl,--start-group {lib}/libMLIR*.a {lib}/libLLVM*.a -Wl,--end-group "
            "-lz -l:libzstd.so.1 -l:libtinfo.so.6 -lpthread -lrt")
cmd, n = re.subn(r"\S*/libMLIR\.so\S*\s+\S*/libLLVM\.so\S*", archives, cmd)
if n != 1:
    sys.exit("portable-pcc: the link command does not name libMLIR.so then libLLVM.so")
cmd = re.sub(r"-o\s+bin/pcc\b", "-o " + dest, cmd)
cmd = cmd.replace("-Wl,--export-dynamic", "-fuse-ld=lld -Wl,--gc-sections -s")
cmd = re.sub(r"-Wl,-rpath,\S+", "-Wl,-rpath,'$ORIGIN/lib'", cmd)
print(cmd)
PY
(cd "$build" && bash "$stage/link.sh")
# Every shared library it loads but the C, C++ and loader runtimes.
ldd "$stage/pcc-portable/pcc" | awk '$3 ~ /^\// {print $3}' |
  grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
  while read -r l; do cp -L "$l" "$stage/pcc-portable/lib/"; done
"$stage/pcc-portable/pcc" --version >/dev/null
# The compression follows the name (.tgz, .txz); xz keeps the package
# small enough to travel beside the repository to a lent GPU machine.
tar caf "$out" -C "$stage" pcc-portable
echo "portable-pcc: wrote $out ($(du -h "$out" | cut -f1))"
