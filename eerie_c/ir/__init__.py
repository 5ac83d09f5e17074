from .graph import Graph, Op, Quant, Tensor, DTYPE_C, DTYPE_NP, SHAPE_ONLY  # noqa: F401
from .verify import verify_graph  # noqa: F401
