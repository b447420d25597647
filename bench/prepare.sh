# Sourced by every bench script, from the project root, once its arguments are read:
#   source bench/prepare.sh NAME [--peers]
# With --peers the PyTorch and DeepSpeed peers are installed first (scripts/setup.sh --bench); dtrain
# is built; $out is bench/out/NAME, emptied, where the script keeps its raw output.
if [ "${2:-}" = --peers ]; then scripts/setup.sh --bench; fi
make -s build >/dev/null
out=bench/out/$1
rm -rf "$out"
mkdir -p "$out"
