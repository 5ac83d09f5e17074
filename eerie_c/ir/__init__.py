from .graph import Graph, Op, Quant, Tensor, DTYPE_C, DTYPE_NP  # noqa: F401
from .verify import verify_graph  # noqa: F401
