# lit configuration for pcc's tests: IR tests (pcc-opt + FileCheck), import
# tests (ONNX text in, IR out), end-to-end model tests and bad-input tests.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "PCC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.pcc_obj_root, "test")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "embedder.cpp", "plan.test.py",
                   "unittests", "models", "Inputs"]

llvm_config.use_default_substitutions()
config.substitutions.append(("%models", os.path.join(config.pcc_src_root,
                                                     "test", "models")))
config.substitutions.append(("%scripts", os.path.join(config.pcc_src_root,
                                                      "test", "e2e")))
# Test scripts need Debian's python3 with python3-onnx and python3-numpy.
config.substitutions.append(("%python", "/usr/bin/python3"))

llvm_config.with_environment("PATH", config.pcc_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["pcc", "pcc-opt", "pcc-translate", "pcc-bench-pairs", "pcc-tokenizer-check"], [config.pcc_tools_dir])
config.substitutions.append(("%pcc_obj_root", config.pcc_obj_root))
config.substitutions.append(("%pcc_src_root", config.pcc_src_root))
# The compiled kernels' cache (see buildSharedLibrary) in the build folder:
# the tests share it and leave the user's alone.
config.environment["PCC_CACHE_DIR"] = os.path.join(config.pcc_obj_root,
                                                   "test", "pcc-cache")

# The CUDA target's tests need nvcc (on PATH or in /usr/local/cuda/bin) to
# build; they run the host emulation of the code, except the GPU tests, which
# need a GPU in use (nvidia-smi lists one).
import shutil
import subprocess

if shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc"):
    config.available_features.add("nvcc")
def has_cuda_gpu():
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout
config.available_features.add("cuda-gpu" if has_cuda_gpu() else "no-cuda-gpu")

# Benchmark scripts that build a git revision's sources beside the working
# tree's (bench/gemm-pairs.sh) need the sources as a git checkout.
if shutil.which("git") and subprocess.run(
        ["git", "-C", config.pcc_src_root, "rev-parse", "--verify", "HEAD"],
        capture_output=True).returncode == 0:
    config.available_features.add("git-checkout")

# The `openai` client package, for the serving tests that drive pcc serve
# with it: utils/setup.sh installs it into build/test-venv (which sees
# Debian's packages) where PyPI can be reached.
client = os.path.join(config.pcc_obj_root, "test-venv", "bin", "python3")
if os.path.exists(client) and subprocess.run(
        [client, "-c", "import openai"], capture_output=True).returncode == 0:
    config.available_features.add("openai")
    config.substitutions.append(("%openai_python", client))
