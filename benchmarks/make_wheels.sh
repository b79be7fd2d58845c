#!/bin/bash
# ./.whl for the GPU machine (carry [".whl"]): the shared wheelhouse of pyproject's dependencies and test extra, less
# what no device call uses and the 64 MiB carry cannot hold: Ray (79 MB, tests/test_suite_ray.py and `suite --ray`
# run on the CPU machine) with the schema packages only it pulls in, and ruff (11 MB, the lint runs in CI).
#   bash benchmarks/make_wheels.sh        (from the repository root, on a networked machine)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash ../shared/gpu/wheelhouse.sh
rm -f .whl/ray-*.whl .whl/ruff-*.whl .whl/jsonschema-*.whl .whl/jsonschema_specifications-*.whl \
  .whl/referencing-*.whl .whl/rpds_py-*.whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
echo "wheels in .whl for the GPU machine: $(ls .whl | wc -l) files, $(du -sh .whl | cut -f1)"
