"""F.interpolate (nearest, nearest-exact, bilinear with align_corners either way), group_norm,
layer_norm and any / all over dims, compiled and run on the host vs eager (float32, max abs
difference 1e-5), with the RESIZE ops' coordinate attributes checked: TFLite's where torch's
rule matches one of them, torch's own tables where it does not."""
import pytest

# CI installs torch (.ci/setup): without it this module errors at collection, never skips.
import torch  # noqa: E402
nn = torch.nn
F = nn.functional

import eerie_c  # noqa: E402
from test_torch_models import check  # noqa: E402


class Interp(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, x):
        return F.interpolate(x, **self.kw) * 2.0


def _resize_op(m, x):
    ops = [op for op in eerie_c.compile(m.eval(), (x,)).graph.ops if op.kind.startswith("RESIZE")]
    assert len(ops) == 1
    return ops[0]


# (kwargs, input H x W, whether torch's rule is one of TFLite's)
NEAREST = [
    (dict(scale_factor=2), (5, 7), True),
    (dict(size=(8, 11)), (5, 7), True),            # output / input not an integer
    (dict(size=(3, 4)), (5, 7), True),             # downsampling
    (dict(scale_factor=1.7), (5, 7), False),       # torch scales by 1 / 1.7, not 5 / 8
    (dict(scale_factor=(2, 3)), (3, 4), True),
]


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("kw,hw,tflite_rule", NEAREST)
def test_interpolate_nearest(mode, kw, hw, tflite_rule):
    torch.manual_seed(0)
    m, x = Interp(mode=mode, **kw), torch.randn(2, 3, *hw)
    check(m, x)
    op = _resize_op(m, x)
    assert op.kind == "RESIZE_NEAREST_NEIGHBOR"
    if mode == "nearest":
        assert ("src_rows" in op.attrs) == (not tflite_rule)
    elif tflite_rule:   # TFLite's half-pixel rule is nearest-exact's (or plain, where they agree)
        assert "src_rows" not in op.attrs


BILINEAR = [
    (dict(scale_factor=2), (5, 7), True),
    (dict(size=(8, 11)), (5, 7), True),
    (dict(size=(3, 4)), (5, 7), True),
    (dict(size=(1, 1)), (5, 7), True),
    (dict(scale_factor=1.5), (5, 7), False),
]


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("kw,hw,tflite_rule", BILINEAR)
def test_interpolate_bilinear(align, kw, hw, tflite_rule):
    torch.manual_seed(1)
    m, x = Interp(mode="bilinear", align_corners=align, **kw), torch.randn(1, 4, *hw)
    check(m, x)
    op = _resize_op(m, x)
    assert op.kind == "RESIZE_BILINEAR"
    # align_corners ignores the scale factor in torch, as in TFLite: always TFLite's rule.
    assert ("rows" not in op.attrs) == (tflite_rule or align)
    assert op.attrs["align_corners"] == align and op.attrs["half_pixel_centers"] == (not align)


def test_interpolate_bicubic_is_one_line_error():
    m, x = Interp(mode="bicubic", scale_factor=2), torch.randn(1, 2, 4, 4)
    with pytest.raises(eerie_c.EerieError) as e:
        eerie_c.compile(m.eval(), (x,))
    msg = str(e.value)
    assert "\n" not in msg and "unsupported PyTorch op aten.upsample_bicubic2d" in msg
    assert 'test_torch_ops_resize_norm.py", line 22' in msg


def test_check_agrees_with_compile():
    """eerie_c.check decomposes as compile does: nearest-exact passes, bicubic is named."""
    x = torch.randn(1, 2, 4, 4)
    assert eerie_c.check(Interp(mode="nearest-exact", scale_factor=2), (x,)).ok
    r = eerie_c.check(Interp(mode="bicubic", scale_factor=2), (x,))
    assert not r.ok and "aten.upsample_bicubic2d" in str(r)


class GroupNorm(nn.Module):
    def __init__(self, groups, c, affine):
        super().__init__()
        self.gn = nn.GroupNorm(groups, c, affine=affine)
        if affine:   # not the identity defaults
            with torch.no_grad():
                self.gn.weight.copy_(torch.rand(c) + 0.5)
                self.gn.bias.copy_(torch.randn(c))

    def forward(self, x):
        return self.gn(x * 3.0 + 1.0)


@pytest.mark.parametrize("groups", [1, 2, 6])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(groups, affine):
    torch.manual_seed(2)
    check(GroupNorm(groups, 6, affine), torch.randn(2, 6, 5, 3))


def test_group_norm_1d():
    torch.manual_seed(3)
    check(GroupNorm(2, 4, True), torch.randn(3, 4, 9))


class LayerNorm(nn.Module):
    def __init__(self, shape, affine, bias=True):
        super().__init__()
        self.ln = nn.LayerNorm(shape, elementwise_affine=affine, bias=bias)
        if affine:
            with torch.no_grad():
                self.ln.weight.copy_(torch.rand(shape) + 0.5)
                if bias:
                    self.ln.bias.copy_(torch.randn(shape))

    def forward(self, x):
        return self.ln(x - 0.5)


@pytest.mark.parametrize("shape", [(8,), (4, 8)], ids=["last_dim", "last_two_dims"])
@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, False)])
def test_layer_norm(shape, affine, bias):
    torch.manual_seed(4)
    check(LayerNorm(shape, affine, bias), torch.randn(2, 3, 4, 8))


def test_layer_norm_functional_stats():
    """F.layer_norm / native_layer_norm's mean and rstd results, read by the program."""
    class Stats(nn.Module):
        def forward(self, x):
            y, mean, rstd = torch.ops.aten.native_layer_norm(x, [5], None, None, 1e-3)
            return y, mean, rstd

    torch.manual_seed(5)
    check(Stats(), torch.randn(3, 5))


class AnyAll(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.tensor([[True, False], [False, False]]))

    def forward(self, x):
        pos = x > 0.8
        a = pos.any(dim=1)
        b = pos.any(dim=-1, keepdim=True)
        c = (x * 0 + x).any()            # a float tensor: its elements' truth
        d = pos.all(dim=0)
        # any over a buffer is known at compile time: folded, no reduction in the C
        e = self.mask.any(dim=1)
        return a.float(), b.float(), c.float(), d.float(), x[:, :2] * e.float()


def test_any_all():
    torch.manual_seed(6)
    check(AnyAll(), torch.rand(4, 3), n=4)
    g = eerie_c.compile(AnyAll().eval(), (torch.rand(4, 3),)).graph
    assert sum(op.kind in ("REDUCE_MAX", "REDUCE_MIN") for op in g.ops) == 4


class Mixed(nn.Module):
    """Every lowering of this file in one program, for the board: torch's own tables (nearest
    and bilinear at scale 1.7 / 1.5), align_corners, group_norm, layer_norm, any."""

    def __init__(self):
        super().__init__()
        self.gn, self.ln = GroupNorm(2, 4, True), LayerNorm((9,), True)

    def forward(self, x):                                      # x [1, 4, 5, 6]
        a = F.interpolate(x, scale_factor=1.7, mode="nearest")          # [1, 4, 8, 10]
        b = F.interpolate(x, scale_factor=1.5, mode="bilinear")         # [1, 4, 7, 9]
        c = F.interpolate(x, size=(8, 10), mode="bilinear", align_corners=True)
        d = self.ln(self.gn(b))
        e = (x > 1.0).any(dim=1, keepdim=True).float()
        return a + c, d, x * e


@pytest.mark.usefixtures("board_tools")
def test_on_board():
    from test_torch_boards import on_board
    torch.manual_seed(7)
    on_board(Mixed(), torch.randn(3, 1, 4, 5, 6).numpy(), (torch.randn(1, 4, 5, 6),))
