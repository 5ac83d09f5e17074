"""The PyTorch frontend: a program captured with torch.export -> the IR, and nothing else.

One job per module, in the order a program goes through them:

* capture.py: export (`torch.export.export`), decomposition to Core ATen, `.pt2` files;
* walker.py: the FX graph, node by node, into IR ops. Parameters, buffers and lifted
  constants become constant tensors; nodes whose inputs are all constants are evaluated with
  torch itself, so only activations reach the IR;
* registry.py / values.py: the op registry (`@lowers`) and the values lowerings share;
* lower_*.py: one function per ATen op, grouped by family (nn: convolution, batch norm,
  matrix products; pool; elementwise; pow; shape; reduce; quant: PT2E quantize/dequantize).
  PyTorch is NCHW while the IR's conv and pooling ops are NHWC: each such op is lowered as
  TRANSPOSE, the op, TRANSPOSE back, and passes/cancel_transposes.py removes the pairs;
* control.py: `torch.cond` / `torch.while_loop` -> IF / WHILE ops with nested graphs;
* batch.py: a dynamic batch dim as a per-sample graph that NAME_invoke runs once per sample
  (checked node by node that no op mixes samples); dynamic.py: other dynamic dims, compiled
  for their maximum and passed to NAME_invoke at run time;
* quiet.py: torch's own logging and warnings kept out of the user's terminal.

Nothing downstream knows the model came from PyTorch.
"""
from .capture import DEFAULT_MAX_ITERATIONS, export_program, load_pt2, load_torch  # noqa: F401
