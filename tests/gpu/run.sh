#!/usr/bin/env bash
# The course on a CUDA GPU: every notebook executed top to bottom (outputs are not compared: the
# numbers differ from the CPU run committed), then the GPU-only unit tests (pytest -m gpu).
#
# Needs: an NVIDIA GPU with its driver, and the course installed (pip install -r requirements.txt).
# Took 8 minutes on one H100 (tests/gpu/recorded/2026-11-27-h100: notebooks 426 s without 04, tests 68 s); a multi-GPU machine also runs the 2-GPU paths (nccl,
# DataParallel's primitives, SyncBatchNorm, the pipeline on two GPUs).
#
#   tests/gpu/run.sh                     # every notebook, then the GPU tests
#   tests/gpu/run.sh 06_oom 03_ddp       # some notebooks (by name prefix, in that order), then the GPU tests
#   GPU_OUT=/some/dir tests/gpu/run.sh   # also keep the executed notebooks and the verdicts there
#
# Prints one verdict line per notebook (PASS / FAIL / SKIP, with its run time) and exits non-zero
# if any notebook or test failed.
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "tests/gpu/run.sh needs a CUDA GPU: torch.cuda.is_available() is False here (no NVIDIA GPU, driver or CUDA build of torch)."
    echo "On a CPU, run the README's test command instead."
    exit 2
fi
"$PY" -c "import torch; print(f'GPU run: torch {torch.__version__}, {torch.cuda.device_count()} × {torch.cuda.get_device_name(0)}')"
status=0
"$PY" tests/gpu/run_notebooks.py "$@" || status=1
echo "--- GPU unit tests (pytest -m gpu)"
"$PY" -m pytest -q -o addopts="" -p no:cacheprovider -m gpu tests || status=1
exit $status
