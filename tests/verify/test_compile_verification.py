"""Issue 4 wired into every compile: report.json carries the proofs and the figures, the
budgets fail with one line and exit 2 and write nothing, and a kernel that emits a forbidden
construct fails the compile as a compiler bug."""
import json
import subprocess
import sys

import pytest

from eerie_c.api import compile_model
from eerie_c.errors import CompilerBug
from eerie_c.kernels import REGISTRY, load_all
from eerie_c.toolchain.targets import TARGETS

# Every target test runs for one Arm and one RISC-V target / board (issue 18).
RV_TARGET, RV_BOARD = "riscv32imac", "riscv-virt"


def eerie(*args):
    return subprocess.run([sys.executable, "-m", "eerie_c.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=600)


def one_line_error(p, *needles):
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("target", ["host", "cortex-m4", "cortex-m0", RV_TARGET])
def test_report_has_proofs_and_figures(models_dir, tmp_path, target):
    compile_model(models_dir / "kws_ref_model.tflite", tmp_path / "o", target=target, name="kws")
    r = json.loads((tmp_path / "o" / "report.json").read_text())
    checks = {v["check"]: v for v in r["verified"]}
    assert set(checks) >= {"arena_plan", "c_source", "stack_bound"}
    assert all(v["ok"] for v in r["verified"])
    assert checks["c_source"]["loops"] > 0 and checks["c_source"]["functions"] >= 12
    assert r["stack_bound_bytes"] > 0 and r["stack_bound_bytes"] == checks["stack_bound"]["stack_bound_bytes"]
    assert r["ram_bytes"] == r["arena_bytes"] + r["static_data_bytes"] + r["stack_bound_bytes"]
    assert r["flash_bytes"] >= r["constant_bytes"] + r["code_bytes"]
    # layer by layer the live-set bound; on DSP targets the depthwise and 1x1 convolutions run
    # in place (issue 6), which takes the arena below it; the default --patch auto then takes
    # a patch stage only where its arena is smaller still, proven like the rest
    p = r["patches"]
    assert p["mode"] == "auto"
    assert p["arena_bytes_before"] == 16000 if target != "cortex-m4" else p["arena_bytes_before"] < 16000
    assert r["arena_bytes"] == p["arena_bytes_after"] <= p["arena_bytes_before"]
    assert (p["chosen"] is not None) == (r["arena_bytes"] < p["arena_bytes_before"])
    assert ("patch_plan" in checks) == (p["chosen"] is not None)
    compiler = checks["stack_bound"]["compiler"]
    assert compiler.split()[0].rsplit("/", 1)[-1] == TARGETS[target].cc, compiler


def test_report_summary_printed(models_dir, tmp_path):
    p = eerie(models_dir / "ad01_int8.tflite", "-o", tmp_path / "o", "--report")
    assert p.returncode == 0, p.stderr
    r = json.loads((tmp_path / "o" / "report.json").read_text())
    assert f"stack bound {r['stack_bound_bytes']:,} B" in p.stdout
    assert "verified: arena_plan ok, c_source ok, stack_bound ok" in p.stdout


def test_arena_budget_too_small(models_dir, tmp_path):
    out = tmp_path / "o"
    line = one_line_error(eerie(models_dir / "kws_ref_model.tflite", "-o", out, "--arena-budget", "15k",
                                "--patch", "off"),   # layer by layer: the 16,000 B live set
                          "--arena-budget", "16000", "15360", "640 bytes over")
    assert not out.exists(), line


@pytest.mark.parametrize("target", ["cortex-m4", RV_TARGET])
def test_stack_budget_too_small(models_dir, tmp_path, target):
    out = tmp_path / "o"
    one_line_error(eerie(models_dir / "kws_ref_model.tflite", "-o", out, "--stack-budget", "16",
                         "--target", target), "--stack-budget", "budget is 16", "bytes over")
    assert not out.exists()


def test_budgets_that_fit_pass(models_dir, tmp_path):
    p = eerie(models_dir / "kws_ref_model.tflite", "-o", tmp_path / "o", "--arena-budget", "16000",
              "--stack-budget", "4096")
    assert p.returncode == 0, p.stderr
    # the budgets met are part of what was verified, with the figures held against them
    r = json.loads((tmp_path / "o" / "report.json").read_text())
    check = next(v for v in r["verified"] if v["check"] == "budgets")
    assert check == {"check": "budgets", "ok": True, "arena_budget": 16000, "arena_bytes": r["arena_bytes"],
                     "stack_budget": 4096, "stack_bound_bytes": r["stack_bound_bytes"]}
    assert r["arena_bytes"] <= 16000 and r["stack_bound_bytes"] <= 4096


def test_bad_budget_value(models_dir, tmp_path):
    one_line_error(eerie(models_dir / "ad01_int8.tflite", "-o", tmp_path / "o", "--arena-budget", "lots"),
                   "not a byte count")


@pytest.mark.parametrize("base", ["mps2-an386", RV_BOARD])
def test_board_ram_budget_names_each_figure(models_dir, tmp_path, base):
    board = json.loads((__import__("eerie_c.resources", fromlist=["x"]).resource_dir("boards")
                        / f"{base}.json").read_text())
    board["name"] = "tiny-ram"
    board["ram"]["size"] = 8192
    (tmp_path / "tiny-ram.json").write_text(json.dumps(board))
    import shutil
    from eerie_c.resources import resource_dir
    shutil.copy(resource_dir("boards") / f"{base}.ld", tmp_path / "tiny-ram.ld")
    board["linker_script"] = "tiny-ram.ld"
    (tmp_path / "tiny-ram.json").write_text(json.dumps(board))
    out = tmp_path / "o"
    one_line_error(eerie(models_dir / "kws_ref_model.tflite", "--board", tmp_path / "tiny-ram.json", "-o", out),
                   "RAM needs", "arena ", "static data", "stack bound", "bytes too many")
    assert not out.exists()


def test_kernel_emitting_a_vla_fails_the_compile(models_dir, monkeypatch):
    """A kernel bug that leaves a run-time sized array in the C is caught on compile."""
    load_all()
    info = REGISTRY["FULLY_CONNECTED"]
    real = info.lower

    def bad_lower(op, g, ctx):
        low = real(op, g, ctx)
        low.body = "int n = (int)in0[0] & 7;\nint8_t tmp[n + 1];\ntmp[0] = 0;\nout0[0] = tmp[0];\n" + low.body
        return low

    monkeypatch.setattr(info, "lower", bad_lower)
    with pytest.raises(CompilerBug, match="variable-length|VLA|constant size|dynamic"):
        compile_model(models_dir / "ad01_int8.tflite")


def test_board_budget_counts_no_input_buffer_when_inputs_live_in_the_arena():
    from eerie_c.toolchain.boards import budget, get_board
    report = {"constant_bytes": 0, "code_bytes": 0, "arena_bytes": 1000, "static_data_bytes": 0,
              "stack_bound_bytes": 100, "inputs": [{"bytes": 300}], "outputs": [{"bytes": 10}]}
    board = get_board("mps2-an386")
    with_buffers = budget(board, dict(report, inputs_in_arena=False))
    in_arena = budget(board, dict(report, inputs_in_arena=True))
    assert with_buffers["io_buffer_bytes"] == 310 and in_arena["io_buffer_bytes"] == 10
    assert with_buffers["ram_bytes"] - in_arena["ram_bytes"] == 300


@pytest.mark.parametrize("board,reserve,n_big,n_small", [("microbit", 2048, 5000, 4000),
                                                         ("sifive_e", 4096, 4500, 3800)])
def test_board_ram_budget_counts_the_stack_reserve_the_firmware_links_with(tmp_path, board, reserve,
                                                                           n_big, n_small):
    """microbit and sifive_e (16 KiB RAM each) reserve 2 and 4 KiB of stack in their linker
    scripts. A model whose arena fits beside the proven stack bound (~100 B) but not beside
    that reserve must fail at compile time (exit 2, one line), not later in the link; one that
    fits must link."""
    import subprocess
    from tflite_builder import ModelBuilder

    def relu_chain(n):
        mb = ModelBuilder()
        x = mb.input([1, n], "int8", scale=0.05, zero_point=-3)
        t = mb.tensor([1, n], "int8", scale=0.05, zero_point=-3)
        mb.op("RELU", [x], [t])
        y = mb.tensor([1, n], "int8", scale=0.05, zero_point=-3)
        mb.op("RELU6", [t], [y])
        mb.output(y)
        return mb.build()

    big, small = tmp_path / "big.tflite", tmp_path / "small.tflite"
    big.write_bytes(relu_chain(n_big))     # 3 n bytes + ~100 B of stack fit; + the reserve does not
    small.write_bytes(relu_chain(n_small))
    out = tmp_path / "o"
    one_line_error(eerie(big, "--board", board, "-o", out),
                   "RAM needs", f"stack reserve {reserve}", "proven stack bound", "bytes too many")
    assert not out.exists()
    fw = tmp_path / "fw"
    rep = compile_model(small, fw, board=board).report
    assert rep["budget"]["ram_bytes"] <= 16384
    p = subprocess.run(["make", "-C", str(fw)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]


@pytest.mark.parametrize("base", ["mps2-an386", RV_BOARD])
def test_board_compile_proves_the_whole_firmware_stack_fits_its_reserve(models_dir, tmp_path, base):
    """With --board the compile itself (not only `eerie-c run`) merges the firmware's call
    graphs (start-up, harness, model, one interrupt or the RISC-V trap handler) and checks the
    bound against the stack reserve of the board's linker script."""
    rep = compile_model(models_dir / "ad01_int8.tflite", tmp_path / "fw", board=base).report
    fw = rep["firmware_stack_bound_bytes"]
    assert rep["stack_bound_bytes"] < fw <= 16384
    assert rep["firmware_stack"]["path"][:2] == ["Reset_Handler", "main"]
    board = json.loads((__import__("eerie_c.resources", fromlist=["x"]).resource_dir("boards")
                        / f"{base}.json").read_text())
    import shutil
    from eerie_c.resources import resource_dir
    shutil.copy(resource_dir("boards") / f"{base}.ld", tmp_path / "tiny-stack.ld")
    board.update(name="tiny-stack", stack_bytes=fw - 8, linker_script="tiny-stack.ld")
    (tmp_path / "tiny-stack.json").write_text(json.dumps(board))
    out = tmp_path / "o"
    one_line_error(eerie(models_dir / "ad01_int8.tflite", "--board", tmp_path / "tiny-stack.json", "-o", out),
                   f"proven stack bound is {fw} bytes", f"reserves {fw - 8}", "8 bytes too many")
    assert not out.exists()
