# Sourced by the CuTe GPU scripts (sweep_cute_gpu.sh, cute_profile_gpu.sh, cute_ladder_gpu.sh) after gpu_env.sh:
# the CuTe DSL 4.8.1 (its wheels in /tmp/kp-stash/files: .carry/01, .whl/dsl and .carry/02) and the sweep's peers
# (/tmp/kp-stash/peers: .whl/peers) installed once into /tmp/cute-site, and put on the path. --target skips the
# meta package's .pth that puts dsl_packages on sys.path: done here.
site=/tmp/cute-site
stash=/tmp/kp-stash
if ! [ -d "$site/nvidia_cutlass_dsl" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" \
    "$stash"/files/nvidia_cutlass_dsl-4.8.1-*.whl "$stash"/files/nvidia_cutlass_dsl_libs_base-4.8.1-*.whl \
    "$stash"/files/nvidia_cutlass_dsl_libs_core-4.8.1-*.whl "$stash"/files/nvidia_cutlass_dsl_libs_cu13-4.8.1-*.whl
fi
if ! [ -d "$site/quack" ] && ls "$stash"/peers/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$stash"/peers/*.whl
fi
export PYTHONPATH="$site/nvidia_cutlass_dsl/dsl_packages:$site${PYTHONPATH:+:$PYTHONPATH}"
