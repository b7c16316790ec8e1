#!/usr/bin/env bash
# Download the wheels that a lent GPU machine lacks for bench/gpu_check.sh, for its Python, into a git-ignored
# folder of this checkout that the device call carries (carry: [".whl"]).
#
#   bash bench/gpu_wheels.sh          # the GPU machine's CPython 3.12 on x86-64, into .whl/
#   bash bench/gpu_wheels.sh 3.11     # another Python's (bench/gpu_check.sh --dry-run here)
#
# The machine has torch with CUDA, numpy, tqdm, pytest, pytest-xdist and opencv-python-headless; it lacks gymnasium (and its
# farama-notifications) and ale-py (with the Atari ROMs), about 3.6 MB together. W&B is not needed there: the
# checks train with wandb_mode disabled, which does not load it. WHEELS=DIR downloads into DIR instead.
set -euo pipefail
cd "$(dirname "$0")/.."
python_version=${1:-3.12}
wheels=${WHEELS:-.whl}
mkdir -p "$wheels"
if [ "$wheels" = .whl ] && ! git check-ignore -q .whl/wheel; then
    echo "/.whl/" >> "$(git rev-parse --git-path info/exclude)"  # as the device's README says: ignored, then carried
fi
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
    platforms+=(--platform "$tag")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$python_version" --implementation cp \
    "${platforms[@]}" -d "$wheels" gymnasium==1.4.0 farama-notifications==0.0.6 ale-py==0.12.1
ls -l "$wheels"
du -ch "$wheels"/*.whl | tail -1
