#!/usr/bin/env python3
"""Build TFLM + CMSIS-NN (the baseline bench/ compares eerie-c with) from the commits pinned in
bench/tflm_baseline/pins.toml, with TFLM's own Makefile, once per core:

    make -f tensorflow/lite/micro/tools/make/Makefile TARGET=cortex_m_generic \\
         TARGET_ARCH=cortex-m4+fp|cortex-m55 OPTIMIZED_KERNEL_DIR=cmsis_nn BUILD_TYPE=release microlite

Nothing is downloaded at build time by TFLM: each dependency its download scripts would fetch
is exported from a git repository (a local mirror or a URL) at its pinned commit into
tensorflow/lite/micro/tools/make/downloads/, with TFLM's patch applied as its script would, so
the Makefile finds them there and skips its downloads. pigweed (which the Makefile clones
while it parses, for its tests only: the microlite library compiles none of it) gets an
empty folder. The compiler is the arm-none-eabi-gcc on PATH (TARGET_TOOLCHAIN_ROOT).

    python bench/tflm_baseline/build.py --mirror /work/.mirror       # OWNER+NAME/repo mirrors
    python bench/tflm_baseline/build.py --tflm-src ~/src/tflite-micro --cmsis-nn-src ~/src/CMSIS-NN \\
        --src flatbuffers=https://github.com/google/flatbuffers ...
    python bench/tflm_baseline/build.py                              # every source from GitHub

Sources: --src NAME=LOCATION for any pins.toml entry (a git repository path, bare or not, or
a git URL), --tflm-src / --cmsis-nn-src as shorthands, --mirror DIR for every entry not
given (DIR/OWNER+NAME/repo, DIR/OWNER+NAME, DIR/NAME or DIR/NAME.git), else the GitHub URL
(cloned once, blobs on demand). The result goes to ~/.cache/eerie-c/tflm-baseline/KEY
($EERIE_TFLM_BASELINE_DIR overrides the folder; KEY names the pin set), one library per
core with the flags it was built with (lib/ARCH/build.json); a second run reuses it
(--force rebuilds). Built with -j2 by default (--jobs).
"""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pins import BOARD_ARCH, DOWNLOADS, Pin, PinError, build_dir, load_pins, pins_key  # noqa: E402

MAKEFILE = "tensorflow/lite/micro/tools/make/Makefile"
CROSS = "arm-none-eabi-"
FLAG_VARS = ("CXXFLAGS", "CCFLAGS", "INCLUDES", "LDFLAGS", "MICROLITE_LIBS", "MICROLITE_LIB_PATH")


class BuildError(RuntimeError):
    """A step failed; the message is one line."""


def run(cmd: list[str], cwd: Path | None = None, what: str = "", **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        tail = " | ".join((p.stderr or p.stdout).strip().splitlines()[-4:])
        raise BuildError(f"{what or cmd[0]} failed (exit {p.returncode}): {tail}")
    return p


def is_git_dir(path: Path) -> bool:
    return path.is_dir() and subprocess.run(["git", "-C", str(path), "rev-parse", "--git-dir"],
                                            capture_output=True).returncode == 0


def mirror_candidates(mirror: Path, pin: Pin) -> list[Path]:
    owner_name = pin.repo.replace("/", "+")
    name = pin.repo.split("/")[1]
    return [mirror / owner_name / "repo", mirror / owner_name, mirror / name, mirror / f"{name}.git"]


def locate(pin: Pin, given: dict[str, str], mirror: Path | None) -> str:
    """Where this pin's git history comes from: a path or a URL."""
    if pin.name in given:
        return given[pin.name]
    if mirror is not None:
        for c in mirror_candidates(mirror, pin):
            if is_git_dir(c):
                return str(c)
    return pin.url


def git_source(loc: str, pin: Pin, cache: Path) -> Path:
    """A local git directory holding pin.commit (a URL is cloned once into cache/git/)."""
    path = Path(loc).expanduser()
    if path.exists():
        if not is_git_dir(path):
            raise BuildError(f"{pin.name}: {loc} is not a git repository")
        local = path
    else:
        local = cache / "git" / (pin.repo.replace("/", "+") + ".git")
        if not local.exists():
            print(f"cloning {loc} (bare, blobs on demand)", file=sys.stderr)
            run(["git", "clone", "--quiet", "--bare", "--filter=blob:none", loc, str(local)],
                what=f"git clone {loc}")
    if subprocess.run(["git", "-C", str(local), "cat-file", "-e", f"{pin.commit}^{{commit}}"],
                      capture_output=True).returncode != 0:
        if local != path:
            run(["git", "-C", str(local), "fetch", "--quiet", "origin", pin.commit], what=f"git fetch {loc}")
        else:
            raise BuildError(f"{pin.name}: {loc} has no commit {pin.commit} (pinned in pins.toml)")
    return local


def export(local: Path, pin: Pin, dest: Path) -> None:
    """The tree of pin.commit into dest (which must not exist yet)."""
    dest.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(local), "archive", "--format=tar", pin.commit],
                               stdout=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, capture_output=True)
    archive.stdout.close()
    if archive.wait() != 0 or untar.returncode != 0:
        raise BuildError(f"{pin.name}: cannot export {pin.commit[:10]} from {local}: "
                         f"{untar.stderr.decode(errors='replace').strip()}")


def prepare_sources(pins: list[Pin], given: dict[str, str], mirror: Path | None, root: Path) -> Path:
    """root/src: the TFLM tree with every dependency in downloads/ (made once per pin set)."""
    src = root / "src"
    done = src / ".eerie-pins-complete"
    if done.exists():
        return src
    part = root / "src.part"
    if part.exists():
        shutil.rmtree(part)
    tflm = pins[0]
    # Parents before children (cmsis before cmsis/Cortex_DFP).
    for pin in [tflm] + sorted(pins[1:], key=lambda p: p.dest.count("/")):
        loc = locate(pin, given, mirror)
        print(f"{pin.name}: {pin.commit[:10]} from {loc}", file=sys.stderr)
        local = git_source(loc, pin, root)
        dest = part if pin.dest == "" else part / DOWNLOADS / pin.dest
        if pin.dest and dest.exists():   # a nested dest inside a dependency's own tree
            shutil.rmtree(dest)
        export(local, pin, dest)
        if pin.patch:
            patch = part / pin.patch
            if not patch.is_file():
                raise BuildError(f"{pin.name}: the TFLM tree has no patch {pin.patch}")
            run(["patch", "-s", "-p1", "-d", str(dest), "-i", str(patch)], what=f"patching {pin.name}")
    # TFLM's Makefile clones pigweed while it parses (third_party.inc) unless the folder exists;
    # the microlite library uses none of it.
    (part / DOWNLOADS / "pigweed").mkdir(parents=True, exist_ok=True)
    (part / ".eerie-pins-complete").write_text(pins_key(pins) + "\n")
    if src.exists():
        shutil.rmtree(src)
    part.rename(src)
    return src


def make_args(arch: str, toolchain_root: str) -> list[str]:
    return ["-f", MAKEFILE, "TARGET=cortex_m_generic", f"TARGET_ARCH={arch}",
            "OPTIMIZED_KERNEL_DIR=cmsis_nn", "BUILD_TYPE=release", "TOOLCHAIN=gcc",
            f"TARGET_TOOLCHAIN_ROOT={toolchain_root}"]


def make_variables(src: Path, args: list[str]) -> dict[str, str]:
    """The Makefile's own values of FLAG_VARS (its print-VAR target)."""
    p = run(["make", "--no-print-directory", *args, *[f"print-{v}" for v in FLAG_VARS]], src,
            what="make print-VARS")
    values = {}
    for line in p.stdout.splitlines():
        key, eq, val = line.partition("=")
        if eq and key in FLAG_VARS:
            values[key] = val.strip()
    missing = set(FLAG_VARS) - set(values)
    if missing:
        raise BuildError(f"TFLM's Makefile printed no {', '.join(sorted(missing))}")
    return values


def absolute_includes(includes: str, src: Path) -> list[str]:
    out = []
    for flag in shlex.split(includes):
        if flag.startswith("-I") and not Path(flag[2:]).is_absolute():
            flag = "-I" + str((src / flag[2:]).resolve())
        out.append(flag)
    return out


def toolchain_root() -> str:
    gcc = shutil.which(CROSS + "gcc")
    if gcc is None:
        raise BuildError(f"'{CROSS}gcc' is not installed (Debian: apt-get install gcc-arm-none-eabi)")
    return str(Path(gcc).parent) + "/"


def build_arch(src: Path, root: Path, arch: str, jobs: int, force: bool) -> Path:
    """TFLM's microlite library for one core, copied with its flags to root/lib/ARCH/."""
    out = root / "lib" / arch
    info = out / "build.json"
    if info.exists() and not force:
        print(f"{arch}: already built ({info})", file=sys.stderr)
        return info
    tc = toolchain_root()
    args = make_args(arch, tc)
    print(f"{arch}: make microlite -j{jobs} (TFLM's Makefile; several minutes)", file=sys.stderr)
    run(["make", "--no-print-directory", f"-j{jobs}", *args, "microlite"], src, what=f"make microlite ({arch})")
    flags = make_variables(src, args)
    lib = src / flags["MICROLITE_LIB_PATH"]
    if not lib.is_file():
        raise BuildError(f"{arch}: the build made no {lib}")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy2(lib, out / lib.name)
    gcc_version = run([tc + CROSS + "gcc", "--version"], what="gcc --version").stdout.splitlines()[0]
    info.write_text(json.dumps({
        "arch": arch, "pins": pins_key(load_pins()), "library": str(out / lib.name),
        "src": str(src), "gcc": gcc_version, "toolchain_root": tc,
        # (split as the shell running the Makefile's commands splits them: it drops the quotes)
        "cxxflags": shlex.split(flags["CXXFLAGS"]), "ccflags": shlex.split(flags["CCFLAGS"]),
        "includes": absolute_includes(flags["INCLUDES"], src),
        "ldflags": shlex.split(flags["LDFLAGS"]), "libs": shlex.split(flags["MICROLITE_LIBS"]),
        "make": ["make", *args, "microlite"],
    }, indent=1) + "\n")
    print(f"{arch}: {out / lib.name}", file=sys.stderr)
    return info


def parse_sources(items: list[str], names: set[str]) -> dict[str, str]:
    given = {}
    for item in items:
        name, eq, loc = item.partition("=")
        if not eq or not loc:
            raise BuildError(f"--src wants NAME=LOCATION, got {item!r}")
        if name not in names:
            raise BuildError(f"--src {name}: pins.toml has no entry {name} (it has {', '.join(sorted(names))})")
        given[name] = loc
    return given


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", action="append", default=[], metavar="NAME=LOCATION",
                    help="a git path or URL for one pins.toml entry (repeatable)")
    ap.add_argument("--tflm-src", help="= --src tflite-micro=LOCATION")
    ap.add_argument("--cmsis-nn-src", help="= --src cmsis-nn=LOCATION")
    ap.add_argument("--mirror", type=Path, help="a folder of git mirrors (OWNER+NAME/repo or NAME)")
    ap.add_argument("--boards", nargs="+", default=list(BOARD_ARCH), choices=list(BOARD_ARCH),
                    help="the cores to build for (default: all)")
    ap.add_argument("--jobs", "-j", type=int, default=2)
    ap.add_argument("--force", action="store_true", help="rebuild the libraries")
    args = ap.parse_args(argv)
    try:
        pins = load_pins()
        items = list(args.src)
        if args.tflm_src:
            items.append(f"tflite-micro={args.tflm_src}")
        if args.cmsis_nn_src:
            items.append(f"cmsis-nn={args.cmsis_nn_src}")
        given = parse_sources(items, {p.name for p in pins})
        if args.mirror is not None and not args.mirror.is_dir():
            raise BuildError(f"--mirror {args.mirror}: no such folder")
        root = build_dir(pins)
        root.mkdir(parents=True, exist_ok=True)
        src = prepare_sources(pins, given, args.mirror, root)
        for board in args.boards:
            build_arch(src, root, BOARD_ARCH[board], args.jobs, args.force)
    except (BuildError, PinError) as e:
        print(f"tflm_baseline: {e}", file=sys.stderr)
        return 1
    print(f"TFLM baseline built in {root}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
