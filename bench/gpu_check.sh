#!/usr/bin/env bash
# The GPU check: one command on a lent GPU machine, about 7 minutes at most (docs/throughput.md, "On a GPU").
#
#   bash bench/gpu_check.sh             # on the GPU machine, from the repository's root
#   bash bench/gpu_check.sh --dry-run   # anywhere without a GPU: the same steps, the benchmark as a smoke run
#
# 1. Installs what the machine lacks from the wheels carried beside the repository (bench/gpu_wheels.sh
#    downloads them into .whl/) into a temporary folder on PYTHONPATH, with the repository itself.
# 2. Runs the cuda tests (tests/test_cuda.py) in 4 processes; they skip, saying why, without CUDA.
# 3. Runs the GPU benchmark (python -m bench.throughput --device cuda): one repetition of each row.
# 4. Prints one table: the tests' result, every measurement, the six report runs' projected time on Colab.
#
# Writes gpu_tests.log, gpu_bench.log and gpu_results.md (the table) to $OUT where it is set (the device tool's
# folder that comes back), else to bench/. PYTHON (default python3) and WHEELS (default .whl) override.
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
wheels=${WHEELS:-.whl}
out=${OUT:-bench}
bench_args=(--reps 1 --seconds 3)
if [ "${1:-}" = --dry-run ]; then
    bench_args=(--quick)
elif [ -n "${1:-}" ]; then
    echo "usage: bash bench/gpu_check.sh [--dry-run]" >&2
    exit 2
fi
start=$SECONDS
rm -f "$out/gpu_results.md"
site=$(mktemp -d)
"$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    "$wheels"/*.whl || { echo "installing the wheels of $wheels failed (bash bench/gpu_wheels.sh)" >&2; exit 1; }
export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
"$python" -c "import ale_py, gymnasium, numpy, torch
print(f'python {__import__(\"platform\").python_version()}, torch {torch.__version__}, gymnasium '
      f'{gymnasium.__version__}, ale-py {ale_py.__version__}, numpy {numpy.__version__}, '
      f'CUDA: {torch.cuda.get_device_name() if torch.cuda.is_available() else None}')" || exit 1
echo "installed in $((SECONDS - start)) s; the cuda tests:"
timeout 170 "$python" -m pytest -q -rs -m cuda -n 4 -p no:cacheprovider -o addopts="" tests/test_cuda.py 2>&1 \
    | tee "$out/gpu_tests.log"
tests=$(grep -E "^[0-9]+ (passed|failed|skipped|error)|^=+ .*(passed|failed|skipped|error)" "$out/gpu_tests.log" \
    | tail -1 | tr -d '=' | xargs)
echo "tests done at $((SECONDS - start)) s; the benchmark:"
timeout 280 "$python" -m bench.throughput --device cuda "${bench_args[@]}" --note "cuda tests: ${tests:-no result}" \
    --output "$out/gpu_results.md" > "$out/gpu_bench.log" 2>&1
code=$?
if [ "$code" != 0 ]; then  # its rows measured so far, and its error (124: out of time)
    grep "steps/s$" "$out/gpu_bench.log"
    tail -5 "$out/gpu_bench.log"
    echo "the benchmark ended with exit code $code" >&2
fi
echo
cat "$out/gpu_results.md" 2>/dev/null
echo "done in $((SECONDS - start)) s"
exit "$code"
