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
llvm_config.add_tool_substitutions(["pcc", "pcc-opt", "pcc-translate"], [config.pcc_tools_dir])
config.substitutions.append(("%pcc_obj_root", config.pcc_obj_root))
config.substitutions.append(("%pcc_src_root", config.pcc_src_root))
