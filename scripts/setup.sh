#!/usr/bin/env bash
# Installs what dtrain needs to build, test and run on Debian 12: Debian's packages, and LibTorch from
# the PyPI `torch` wheel in the project's own virtual environment (.venv). Python only installs it:
# dtrain loads LibTorch's shared libraries and runs no Python. Idempotent: when everything is present
# it only checks (well under a second) and touches nothing.
# Usage: scripts/setup.sh [--bench | --cuda]
#   --bench  adds the peers the benchmarks compare against: PyTorch with all its dependencies in the
#            same .venv (torchrun, FSDP2, DTensor, pipelining), DeepSpeed, OpenMPI, Hugging Face
#            tokenizers and sentencepiece (which also remake the tokenizer test fixtures), and transformers
#            for the Hugging Face test models (tests/data/hf), and Accelerate (a memory estimator peer).
#   --cuda   adds what the CUDA build links against beyond the machine's CUDA 13 toolkit, cuDNN and
#            NCCL: the three libraries libtorch_cuda needs that the toolkit lacks, as torch's own wheels.
set -euo pipefail
cd "$(dirname "$0")/.."

torch_version=2.11.0
deepspeed_version=0.19.8
# The wheel is built with CUDA 13: even libtorch_cpu needs libcudart and libcupti to load. These two
# small wheels, from torch's own requirements, provide them; the rest of CUDA is left out.
cuda_runtime="cuda-toolkit[cudart,cupti]==13.0.2"
venv=.venv

bench=0 cuda=0
case "${1:-}" in
  "") ;;
  --bench) bench=1 ;;
  --cuda) cuda=1 ;;
  *) echo "setup: unknown option '$1' (usage: scripts/setup.sh [--bench | --cuda])" >&2; exit 2 ;;
esac

packages=(build-essential cmake python3-venv ca-certificates libgloo-dev nlohmann-json3-dev libcli11-dev
          libgtest-dev libxxhash-dev liburing-dev libsentencepiece-dev libicu-dev libstb-dev libfreetype-dev
          fonts-dejavu-core pkg-config fortunes-min fortunes procps
          openssh-client openssh-server)
((bench)) && packages+=(openmpi-bin libopenmpi-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's own Python makes the environment, whatever python3 comes first on PATH.
[[ -x $venv/bin/python ]] || /usr/bin/python3 -m venv "$venv"
site=$(echo "$venv"/lib/python3*/site-packages)
installed() { compgen -G "$site/$1.dist-info" >/dev/null; }
pip=("$venv/bin/pip" install -q --disable-pip-version-check)

if ! installed "torch-$torch_version"; then
  echo "setup: installing LibTorch $torch_version from PyPI into $venv (a 530 MB wheel; its CUDA libraries are left out)"
  "${pip[@]}" --no-deps "torch==$torch_version"
fi
if ! installed "nvidia_cuda_runtime-*" || ! installed "nvidia_cuda_cupti-*"; then
  echo "setup: installing the CUDA runtime libraries LibTorch loads ($cuda_runtime)"
  "${pip[@]}" "$cuda_runtime"
fi
if ((bench)) && ! installed "triton-*"; then
  echo "setup: installing PyTorch $torch_version with its dependencies into $venv for the benchmark peers (several GB)"
  "${pip[@]}" "torch==$torch_version" numpy
fi
# DeepSpeed's own dependencies only: letting pip resolve them would replace the PyTorch above.
if ((bench)) && [[ ! -d $site/deepspeed ]]; then
  echo "setup: installing DeepSpeed $deepspeed_version into $venv for the ZeRO benchmark's peer rows"
  "${pip[@]}" hjson ninja psutil py-cpuinfo pydantic msgpack einops tqdm packaging wheel
  "${pip[@]}" --no-deps --no-build-isolation "deepspeed==$deepspeed_version"
fi
# transformers remakes the Hugging Face test models (tests/data/hf/README.md) and checks exports by hand.
if ((bench)) && ! installed "transformers-5.24.0"; then
  echo "setup: installing transformers and safetensors into $venv (tests/data/hf's fixtures)"
  "${pip[@]}" "transformers==5.24.0" "safetensors==0.8.0"
fi
# Accelerate's memory estimator, a peer of `dtrain estimate` (bench/estimate_peers.py); its other
# dependencies come with PyTorch and transformers above.
if ((bench)) && ! installed "accelerate-1.15.0"; then
  echo "setup: installing Accelerate into $venv for the memory estimate's peer rows"
  "${pip[@]}" --no-deps "accelerate==1.15.0" pyyaml
fi
# The tokenizer fixtures' reference libraries (tests/data/tokenizers/make_fixtures.py) and the
# tokenization benchmark's peer.
if ((bench)) && ! { installed "tokenizers-0.23.3" && installed "sentencepiece-0.2.3"; }; then
  echo "setup: installing Hugging Face tokenizers and sentencepiece into $venv for the tokenizer fixtures and benchmark"
  "${pip[@]}" "tokenizers==0.23.3" "sentencepiece==0.2.3"
fi
if ((cuda)) && ! { installed "nvidia_cusparselt_cu13-*" && installed "nvidia_nvshmem_cu13-*" && installed "nvidia_cufile-*"; }; then
  echo "setup: installing cuSPARSELt, NVSHMEM and cuFile for linking libtorch_cuda"
  "${pip[@]}" "nvidia-cusparselt-cu13==0.8.0" "nvidia-nvshmem-cu13==3.4.5" "cuda-toolkit[cufile]==13.0.2"
fi
