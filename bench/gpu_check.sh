#!/usr/bin/env bash
# The GPU check: one command on a lent GPU machine (one GPU, 16 cores) that ends within 6 minutes and always
# reports (docs/throughput.md, "On a GPU"). From the repository's root:
#
#   bash bench/gpu_wheels.sh            # first, where pip reaches PyPI: the wheels the GPU machine lacks, into .whl/
#   bash bench/gpu_check.sh             # on the GPU machine, with .whl/ carried beside the repository
#   bash bench/gpu_check.sh --dry-run   # without a GPU: the same phases, the benchmark as a smoke run on the CPU
#
# 1. install: the wheels of .whl/ into a temporary folder on PYTHONPATH, with the repository itself (a dry run
#    without wheels uses the installed packages); the versions, and the GPU, which a real run requires.
# 2. cuda tests: pytest -m cuda tests/test_cuda.py in up to 8 processes, for at most TESTS_S seconds.
# 3. benchmark: python -m bench.gpu, its rows in order of need (bench/gpu.py), each the median
#    of 3 windows, for the time the check has left; the rows that do not fit are listed as not measured.
# 4. left running: every process of the check (GPU_CHECK_ID in its environment) still alive is killed, and named.
#
# gpu_results.md holds every phase's time and result, what failed, and the benchmark's table with the GPU run's
# projected time; it is rewritten after each phase (the benchmark's table, gpu_bench.md, after each row), so that a
# check cut short keeps what ran. With gpu_tests.log and gpu_bench.log, in $OUT where it is set (the device tool's
# folder that comes back), else in bench/. The exit code is 1 when anything failed (named on the last line), else 0.
# Environment: PYTHON (python3), WHEELS (.whl), BUDGET_S (360, the whole check), TESTS_S (150), ROWS (the benchmark's
# first ROWS rows only) and PYTEST_ADDOPTS (pytest's own, e.g. -k to run fewer tests).
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
wheels=${WHEELS:-.whl}
out=${OUT:-bench}
budget=${BUDGET_S:-360}
tests_s=${TESTS_S:-150}
dry=
bench_args=(--output "$out/gpu_bench.md" ${ROWS:+--rows "$ROWS"})
if [ "${1:-}" = --dry-run ]; then
    dry=" --dry-run"
    bench_args+=(--quick)
elif [ -n "${1:-}" ]; then
    echo "usage: bash bench/gpu_check.sh [--dry-run]" >&2
    exit 2
fi
start=$SECONDS
phases=()  # the table's lines
failed=()  # what failed, one phrase each
status="cut short"
export GPU_CHECK_ID="$$.$RANDOM" PYTHONUNBUFFERED=1
mkdir -p "$out"
rm -f "$out/gpu_results.md" "$out/gpu_bench.md"

write_results() {
    {
        echo "# GPU check"
        echo
        echo "\`bash bench/gpu_check.sh$dry\`, $(date -u '+%Y-%m-%d %H:%M UTC'): **$status**."
        [ -n "$dry" ] && echo "A dry run on the CPU: its timings are not the GPU's."
        echo
        echo "| phase | seconds | result |"
        echo "| --- | ---: | --- |"
        printf '%s\n' "${phases[@]}"
        echo
        cat "$out/gpu_bench.md" 2>/dev/null
    } > "$out/gpu_results.md"
}

phase() {  # name, start time, result: a line of the table, written at once
    phases+=("| $1 | $((SECONDS - $2)) | $3 |")
    echo "$1: $3 ($((SECONDS - $2)) s)"
    write_results
}

leftovers() {  # "pid command" of each process of this check still alive, but this shell and the scan
    "$python" - "$$" <<'EOF'
import os, sys
from pathlib import Path
tag, mine = f"GPU_CHECK_ID={os.environ['GPU_CHECK_ID']}".encode(), {os.getpid(), os.getppid(), int(sys.argv[1])}
for proc in Path("/proc").glob("[0-9]*"):
    try:
        if int(proc.name) not in mine and tag in (proc / "environ").read_bytes().split(b"\0"):
            print(proc.name, (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:100])
    except OSError:
        pass
EOF
}

# 1. install
t=$SECONDS
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
if compgen -G "$wheels/*.whl" > /dev/null; then
    from="the wheels of $wheels"
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$wheels"/*.whl \
        > "$out/gpu_install.log" 2>&1 || failed+=("install: pip failed on $from ($(tail -1 "$out/gpu_install.log"))")
elif [ -n "$dry" ]; then
    from="the installed packages (no wheels in $wheels)"
else
    from="nothing"
    failed+=("install: no wheels in $wheels (run bash bench/gpu_wheels.sh, then carry .whl)")
fi
export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}"
versions=$("$python" -c "import ale_py, gymnasium, numpy, torch
print(f'python {__import__(\"platform\").python_version()}, torch {torch.__version__}, gymnasium '
      f'{gymnasium.__version__}, ale-py {ale_py.__version__}, numpy {numpy.__version__}, '
      f'CUDA: {torch.cuda.get_device_name() if torch.cuda.is_available() else None}')" 2>&1 | tail -1)
[ ${#failed[@]} = 0 ] && [[ $versions != python* ]] && failed+=("install: an import failed ($versions)")
[ -z "$dry" ] && [[ $versions == *"CUDA: None" ]] && failed+=("install: torch sees no CUDA device")
installed=${#failed[@]}
phase install "$t" "$from: $versions"

# 2. cuda tests
t=$SECONDS
if [ "$installed" = 0 ]; then
    workers=$(nproc)
    [ "$workers" -gt 8 ] && workers=8
    timeout -k 5 "$tests_s" "$python" -m pytest -q -rfEs -m cuda -n "$workers" -p no:cacheprovider -o addopts="" \
        tests/test_cuda.py > "$out/gpu_tests.log" 2>&1
    code=$?
    result=$(grep -E "^=* ?[0-9]+ (passed|failed|skipped|error|deselected)|no tests ran" "$out/gpu_tests.log" | tail -1 \
        | tr -d = | xargs)
    names=$(grep -E "^(FAILED|ERROR) " "$out/gpu_tests.log" | cut -d' ' -f2 | xargs)
    if [ "$code" = 124 ] || [ "$code" = 137 ]; then
        result="out of time after $tests_s s${result:+ ($result)}"
    fi
    if [ "$code" != 0 ]; then
        failed+=("cuda tests: ${result:-exit code $code}${names:+: $names}")
        tail -30 "$out/gpu_tests.log"
    fi
    phase "cuda tests" "$t" "${result:-no result, exit code $code}${names:+; failed: $names}"
else
    phase "cuda tests" "$t" "not run: the install failed"
fi

# 3. benchmark, in the time left but for 15 s (the last phase and the results)
t=$SECONDS
left=$((budget - (SECONDS - start) - 15))
if [ "$installed" != 0 ]; then
    phase benchmark "$t" "not run: the install failed"
elif [ "$left" -lt 20 ]; then
    failed+=("benchmark: no time left")
    phase benchmark "$t" "not run: $left s left of the check's $budget s"
else
    timeout -k 5 "$left" "$python" -m bench.gpu "${bench_args[@]}" --budget-s "$((left - 10))" \
        > "$out/gpu_bench.log" 2>&1
    code=$?
    result=$(grep -o "[0-9]* of [0-9]* rows measured" "$out/gpu_bench.md" 2>/dev/null || echo "no row measured")
    if [ "$code" != 0 ]; then
        if [ "$code" = 124 ] || [ "$code" = 137 ]; then
            error="out of time after $left s"
        else
            error=$(tail -1 "$out/gpu_bench.log")
        fi
        failed+=("benchmark: $error")
        result="$result; $error"
        tail -15 "$out/gpu_bench.log"
    fi
    phase benchmark "$t" "$result"
fi

# 4. left running
t=$SECONDS
left_running=$(leftovers)
if [ -n "$left_running" ]; then
    kill -9 $(cut -d' ' -f1 <<< "$left_running") 2>/dev/null
    failed+=("left running: $(cut -d' ' -f1 <<< "$left_running" | xargs) (killed)")
fi
phase "left running" "$t" "${left_running:-none}"

if [ ${#failed[@]} = 0 ]; then
    status="passed"
else
    status="FAILED: $(printf '%s; ' "${failed[@]}")"
    status=${status%; }
fi
phases+=("| total | $((SECONDS - start)) | the check's budget: $budget s |")
if [ -n "$dry" ]; then  # the GPU run's time: this install, the tests' limit, the benchmark's rows at the GPU run's size
    rows_s=$(grep -o "these rows take about [0-9]* s" "$out/gpu_bench.md" 2>/dev/null | grep -o "[0-9]*" || echo 0)
    projected=$(($(cut -d'|' -f3 <<< "${phases[0]}") + tests_s + rows_s))
    phases+=("| projected GPU run | $projected | this install + the tests' limit ($tests_s s) + the benchmark's rows at \
full size with this run's start-up ($rows_s s); the benchmark stops at the budget ($budget s) |")
fi
write_results
echo
cat "$out/gpu_results.md"
echo "$status"
[ ${#failed[@]} = 0 ]
