"""Graph -> Graph rewrites, run in order, each followed by the IR verifier."""
from ..ir import Graph, verify_graph
from .alias_reshape import alias_reshapes
from .cancel_transposes import cancel_transposes
from .channel_tables import channel_tables
from .control_flow import linearize_control_flow
from .dequantize_hybrid import dequantize_hybrid
from .fold_constants import fold_constant_muls, fold_constant_reshapes
from .depthwise_as_conv import depthwise_as_conv
from .fold_pad import fold_pad
from .fuse_conv_add import fuse_conv_add
from .fuse_float_activation import fuse_float_activation
from .fold_qdq import dequantize_last, fold_qdq
from .fold_shapes import fold_shapes
from .split_grouped_conv import split_grouped_conv

PIPELINE = [fold_constant_muls, cancel_transposes, linearize_control_flow, fold_shapes, dequantize_hybrid, split_grouped_conv,
            fold_constant_reshapes, cancel_transposes,
            fold_qdq, cancel_transposes, dequantize_last,
            alias_reshapes, depthwise_as_conv, fold_pad, channel_tables, fuse_conv_add, fuse_float_activation]


def run_passes(g: Graph) -> Graph:
    for p in PIPELINE:
        g = verify_graph(p(g), p.__name__)
    return g
