"""More ATen ops vs eager (float32, max abs difference 1e-5): transposed convolution
(1-D and 2-D, strides, padding, output_padding, with and without bias) lowered to
TRANSPOSE_CONV plus a crop; products of two computed tensors (mm, bmm, matmul with broadcast
batch dims, attention, also over a dynamic sequence) lowered to BATCH_MATMUL; max/avg pooling
with ceil_mode and count_include_pad=False/True with padding."""
import pytest

# CI installs torch (.ci/setup): without it this module errors at collection, never skips.
import torch  # noqa: E402
nn = torch.nn
F = nn.functional

import eerie_c  # noqa: E402
from test_torch_models import check  # noqa: E402


class Up2d(nn.Module):
    def __init__(self, stride, padding, output_padding, bias):
        super().__init__()
        self.c = nn.ConvTranspose2d(3, 4, 3, stride=stride, padding=padding, output_padding=output_padding,
                                    bias=bias)

    def forward(self, x):
        return torch.relu(self.c(x)) + self.c(x) * 0.5


class Up1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.ConvTranspose1d(4, 2, 4, stride=2, padding=1)

    def forward(self, x):
        return self.c(x)


@pytest.mark.parametrize("stride,padding,output_padding,bias", [
    (1, 0, 0, True), (2, 1, 1, True), (2, 0, 0, False), ((2, 3), (1, 2), (1, 0), True),
])
def test_conv_transpose2d(stride, padding, output_padding, bias):
    torch.manual_seed(0)
    check(Up2d(stride, padding, output_padding, bias), torch.randn(1, 3, 5, 6))


def test_conv_transpose1d():
    torch.manual_seed(1)
    check(Up1d(), torch.randn(2, 4, 7))


# ---- products of two computed tensors (BATCH_MATMUL) ------------------------------------------

class MM(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 5)

    def forward(self, x, y):
        return torch.mm(self.a(x), y.t()), torch.mm(x.t(), y)


class BMM(nn.Module):
    def forward(self, x, y):
        return torch.bmm(x, y.transpose(1, 2)).relu()


class Attention(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        att = torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5, dim=-1)
        return att @ v


class Broadcast(nn.Module):
    """matmul with broadcast batch dims, a 2-D operand and a constant on the left."""
    def __init__(self):
        super().__init__()
        self.register_buffer("c", torch.randn(3, 4))

    def forward(self, x, y):
        return torch.matmul(x, y) + torch.matmul(self.c, y) + torch.matmul(x, y[0, 0])


class ComputedWeights(nn.Module):
    """addmm and linear whose weight matrix is computed (bias constant or computed)."""
    def __init__(self):
        super().__init__()
        self.b = nn.Parameter(torch.randn(5))

    def forward(self, x, y):                       # x [4, 6], y [4, 5]
        w = torch.tanh(x.t() @ y)                  # [6, 5], computed
        return torch.addmm(self.b, x, w), F.linear(x, w.t(), self.b), F.linear(x, w.t(), y[0])


def test_addmm_and_linear_with_computed_weights():
    torch.manual_seed(9)
    check(ComputedWeights(), torch.randn(4, 6), torch.randn(4, 5))


def test_mm():
    torch.manual_seed(2)
    check(MM(), torch.randn(4, 6), torch.randn(4, 5))


def test_bmm():
    torch.manual_seed(3)
    check(BMM(), torch.randn(3, 4, 5), torch.randn(3, 6, 5))


def test_attention():
    torch.manual_seed(4)
    check(Attention(), torch.randn(2, 7, 8))


def test_matmul_broadcast():
    torch.manual_seed(5)
    check(Broadcast(), torch.randn(2, 1, 3, 4), torch.randn(2, 5, 4, 6))


def test_attention_over_a_dynamic_sequence():
    """Dynamic batch and T: the T x T scores are masked (-inf) before the softmax over T and
    (0) before the contraction over T in att @ v."""
    from test_dynamic import compare_seq, seq_inputs
    torch.manual_seed(6)
    compare_seq(Attention(), seq_inputs([(1, 3), (3, 10), (0, 6), (2, 7)], feat=8), (torch.randn(2, 5, 8),),
                ({0: torch.export.Dim("batch", max=3), 1: torch.export.Dim("seq", min=2, max=10)},))


# ---- pooling with ceil_mode / count_include_pad -----------------------------------------------

class Pool(nn.Module):
    def __init__(self, kind, k, s, p, ceil, incl=True):
        super().__init__()
        self.kind, self.k, self.s, self.p, self.ceil, self.incl = kind, k, s, p, ceil, incl

    def forward(self, x):
        if self.kind == "max":
            return F.max_pool2d(x, self.k, self.s, self.p, ceil_mode=self.ceil)
        return F.avg_pool2d(x, self.k, self.s, self.p, ceil_mode=self.ceil, count_include_pad=self.incl)



@pytest.mark.parametrize("k,s,p,ceil", [
    (2, 2, 0, True), (3, 2, 1, True), (3, 2, 0, True), ((3, 2), (2, 3), (1, 0), True), (3, 3, 1, True),
    (2, 2, 0, False),
])
def test_max_pool_ceil_mode(k, s, p, ceil):
    torch.manual_seed(7)
    check(Pool("max", k, s, p, ceil), torch.randn(1, 3, 7, 8))


@pytest.mark.parametrize("k,s,p,ceil,incl", [
    (2, 2, 0, True, True), (3, 2, 1, True, True), (3, 2, 1, True, False), (3, 2, 1, False, False),
    ((3, 2), (2, 3), (1, 0), True, False), (2, 1, 1, False, False), (3, 3, 1, True, True), (4, 3, 2, False, False),
    (2, 3, 1, False, False),   # the last input column falls in no window: cropped
])
def test_avg_pool_ceil_mode_and_count_include_pad(k, s, p, ceil, incl):
    torch.manual_seed(8)
    check(Pool("avg", k, s, p, ceil, incl), torch.randn(2, 3, 7, 8))


# ---- elementwise math, comparisons, logic, casts, powers and constants (one compile) ----------

class MathOps(nn.Module):
    """Every op here is pointwise on x, y [3, 8]; pow inputs are kept in ranges where float32
    error stays below 1e-5 absolute."""
    def forward(self, x, y):
        c = x.clamp(-1.5, 1.5)
        p = x.abs() + 0.5
        s = torch.where(x < 0, -p, p)                # negative bases, |s| >= 0.5
        q = y.clamp(-2.0, 2.0)
        logic = torch.stack([
            ((x.round() == y.round()) | (x != 0.5)).float(), torch.where(x <= y, x, y),
            torch.where(x >= 0.2, 1.0, 0.0), torch.logical_and(x > 0, y > 0).float(),
            torch.logical_or(x > 0, y < 0).float(), torch.logical_not(x > 0).float(),
            torch.logical_xor(x > 0, y > 0).float(), torch.logical_xor(x.round(), y > 0).float()])
        arith = torch.stack([
            torch.log(x.abs() + 0.1), x / (y.abs() + 0.5), 1 / p, 3.0 / p,
            F.hardtanh(x, -0.3, 0.7), F.hardtanh(x, -2.0, 2.0), F.hardswish(x),
            x + torch.ones(8) * 2 + torch.full((8,), 0.5) - torch.zeros(8), torch.full_like(x, 3.0) * x,
            (x > 0).float() * x])
        powers = torch.stack([
            c ** 4, c ** 5, p ** -2, p ** -3, x ** 0, p ** 1.5, p ** -1.5, p ** 0.5, p ** q,
            s ** q.round(), 2.0 ** q, (-2.0) ** q.round(), (-2.0) ** q, x ** 1.5])
        return logic, arith, powers, x.to(torch.int32), (y > 0).to(torch.int32) + 1


def test_math_logic_casts_and_powers():
    """Casts insert aten._assert_tensor_metadata (a no-op); 1 / x exports as reciprocal;
    x ** 1.5 and (-2) ** q are NaN where the base is negative and the exponent not an integer,
    as in torch (check() compares NaN positions too)."""
    torch.manual_seed(10)
    check(MathOps(), torch.randn(3, 8), torch.randn(3, 8), n=3)


# ---- nn ops: depthwise (multiplier 1 and 2), adaptive pools, batch norm after linear ----------

class NNOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw1 = nn.Conv2d(4, 4, 3, groups=4, padding=1)           # depth multiplier 1
        self.dw2 = nn.Conv2d(4, 8, 3, groups=4, bias=False)           # depth multiplier 2
        self.fc = nn.Linear(4 * 9, 6)
        self.bn = nn.BatchNorm1d(6)

    def forward(self, x):                                             # x [2, 4, 7, 7]
        a = F.hardswish(self.dw1(x))
        b = self.dw2(a)                                               # [2, 8, 5, 5]
        pools = (F.adaptive_avg_pool2d(a, 2), F.adaptive_avg_pool2d(a, 3),   # 7->2, 7->3: overlap
                 F.adaptive_avg_pool2d(a, (5, 3)), F.adaptive_avg_pool2d(b, (1, 2)))   # 7->5: uneven
        return (*pools, self.bn(self.fc(F.adaptive_avg_pool2d(a, 3).flatten(1))))


def test_depthwise_adaptive_pool_and_linear_batch_norm():
    from test_torch_models import randomize_bn
    torch.manual_seed(11)
    check(randomize_bn(NNOps()), torch.randn(2, 4, 7, 7))


def test_batch_norm_folds_into_linear():
    from test_torch_models import randomize_bn

    class LinBN(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.bn = nn.Linear(5, 4), nn.BatchNorm1d(4)

        def forward(self, x):
            return self.bn(self.fc(x))
    res = eerie_c.compile(randomize_bn(LinBN()).eval(), (torch.randn(3, 5),))
    assert [op.kind for op in res.graph.ops] == ["FULLY_CONNECTED"]
