"""More ATen ops vs eager (float32, within 1e-5 of the output range): transposed convolution
(1-D and 2-D, strides, padding, output_padding, with and without bias) lowered to
TRANSPOSE_CONV plus a crop."""
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

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
