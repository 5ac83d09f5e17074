"""Plans no target can hold are refused with the figure, before any C is generated: an arena
or constants beyond what int offsets address (2**31 - 1 bytes), or more than a 32-bit
Cortex-M's address space in all. Three 2 GB float tensors once compiled on the host to
`static uint8_t big_arena[4000000000]` and were an internal error (exit 3) on cortex-m4."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import ModelBuilder  # noqa: E402

from eerie_c.api import compile_model  # noqa: E402
from eerie_c.budgets import MAX_ARENA_BYTES, check_limits  # noqa: E402
from eerie_c.errors import EerieError  # noqa: E402
from eerie_c.toolchain.targets import get_target  # noqa: E402


def three_live_tensors(n: int) -> bytes:
    """x -> relu, relu6 -> add: x, both intermediates live at once, then y: arena ~ 3 * 4n."""
    mb = ModelBuilder()
    x = mb.input([1, n], "float32", name="x")
    h1, h2 = mb.tensor([1, n], "float32", name="h1"), mb.tensor([1, n], "float32", name="h2")
    y = mb.tensor([1, n], "float32", name="y")
    mb.op("RELU", [x], [h1])
    mb.op("RELU6", [x], [h2])
    mb.op("ADD", [h1, h2], [y], "AddOptions")
    mb.output(y)
    return mb.build()


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("limits") / "big.tflite"
    p.write_bytes(three_live_tensors(500_000_000))   # 2 GB per tensor, each under the limit
    return p


@pytest.mark.parametrize("target", ["host", "cortex-m4", "riscv32imac"])
def test_arena_beyond_int_offsets_is_refused(big, tmp_path, target):
    with pytest.raises(EerieError, match=r"arena needs 4000000000 bytes, more than the 2147483647") as e:
        compile_model(big, tmp_path / "out", target=target, name="big")
    assert "\n" not in str(e.value) and not (tmp_path / "out").exists()


def test_cli_reports_the_figure_in_one_line(big, tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "eerie_c.cli", "-q", big, "--target", "cortex-m4", "-o", out],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "4000000000 bytes" in lines[0], p.stderr
    assert not out.exists()


def test_limits_of_constants_and_address_space():
    host, m4 = get_target("host"), get_target("cortex-m4")
    check_limits("m", host, MAX_ARENA_BYTES, MAX_ARENA_BYTES, 2 ** 31)   # 64-bit host: fine
    with pytest.raises(EerieError, match="constants need 2147483648 bytes"):
        check_limits("m", host, 0, 2 ** 31, 0)
    with pytest.raises(EerieError, match="cortex-m4's 32-bit address space"):
        check_limits("m", m4, MAX_ARENA_BYTES, MAX_ARENA_BYTES, 2 ** 20)
    check_limits("m", m4, 2 ** 30, 2 ** 30, 2 ** 20)
    rv = get_target("riscv32imac")   # RV32: the same 32-bit address space
    with pytest.raises(EerieError, match="riscv32imac's 32-bit address space"):
        check_limits("m", rv, MAX_ARENA_BYTES, MAX_ARENA_BYTES, 2 ** 20)
    check_limits("m", rv, 2 ** 30, 2 ** 30, 2 ** 20)
