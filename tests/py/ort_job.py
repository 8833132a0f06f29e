#!/usr/bin/env python3
"""ort_job.py: a four-layer MLP run 20 times by ONNX Runtime (1.32.0, CPU) with its profiler on,
the job behind tests/data/kineto/onnxruntime/profile.json.gz: another framework's Chrome trace (a
bare JSON array of complete events, categories "Session" and "Node", nested objects in "args").
Needs onnxruntime and onnx (pip), which scripts/setup.sh does not install: the recording is kept.
    python3 tests/py/ort_job.py   # writes ort_<date>.json here and prints its name
"""
import numpy as np, onnx, onnxruntime as ort
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(0)
nodes, inits = [], []
x = "x"
for i in range(4):
    w = numpy_helper.from_array(rng.standard_normal((256, 256)).astype(np.float32), f"w{i}")
    inits.append(w)
    nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"], name=f"layer{i}.matmul"))
    nodes.append(helper.make_node("Relu", [f"h{i}"], [f"r{i}"], name=f"layer{i}.relu"))
    x = f"r{i}"
g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
                      [helper.make_tensor_value_info(x, TensorProto.FLOAT, [64, 256])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 9
so = ort.SessionOptions(); so.enable_profiling = True; so.profile_file_prefix = "ort"
so.intra_op_num_threads = 2
s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
inp = rng.standard_normal((64, 256)).astype(np.float32)
for _ in range(20):
    s.run(None, {"x": inp})
print(s.end_profiling())
