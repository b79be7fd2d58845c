# Sourced by the CuTe GPU scripts (sweep_cute_gpu.sh, cute_profile_gpu.sh, cute_ladder_gpu.sh) after gpu_env.sh:
# the CuTe DSL 4.8.1 (the libs-cu13 wheel in /tmp/kp-stash/files from .carry/01-03, the three small ones in .whl/dsl)
# and the sweep's peers (.whl/peers) installed once into /tmp/cute-site, and put on the path. --target skips the
# meta package's .pth that puts dsl_packages on sys.path: done here.
site=/tmp/cute-site
stash=/tmp/kp-stash
small="$stash/files"; [ -d "${root:-.}/.whl/dsl" ] && small="${root:-.}/.whl/dsl"  # carried with .whl, or stashed
peers="$stash/peers"; [ -d "${root:-.}/.whl/peers" ] && peers="${root:-.}/.whl/peers"
if ! [ -d "$site/nvidia_cutlass_dsl" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" \
    "$small"/nvidia_cutlass_dsl-4.8.1-*.whl "$small"/nvidia_cutlass_dsl_libs_base-4.8.1-*.whl \
    "$small"/nvidia_cutlass_dsl_libs_core-4.8.1-*.whl "$stash"/files/nvidia_cutlass_dsl_libs_cu13-4.8.1-*.whl
fi
if ! [ -d "$site/quack" ] && ls "$peers"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$peers"/*.whl
fi
export PYTHONPATH="$site/nvidia_cutlass_dsl/dsl_packages:$site${PYTHONPATH:+:$PYTHONPATH}"
