"""Model names and the file names of a generated project.

A model's name is both its C prefix (NAME_invoke, NAME_INPUT0_ELEMENTS) and the stem of its
files (NAME.c, NAME.h, NAME.mk), which sit beside the files eerie-c generates around them: a
firmware project's main.c, Makefile, runtime/eerie_*.c and the board's linker script, the
host harness host_main.c of `eerie-c run`, and the objects `make stack` writes as
stack/<stem>.o. A name that hits one of those would overwrite it (a model called `main`
replaced the harness, so `make` failed) or break the build (`Makefile.c` makes GNU make
rebuild the Makefile from it; `eerie_rt.h` shadows the runtime's header). So those stems are
reserved: an explicit --name that hits one is refused, a default name taken from a file name
gets a suffix instead (`main.tflite` compiles as `main_model`).
"""
from __future__ import annotations

import re
from pathlib import Path

from .errors import CompilerBug, EerieError

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_C_KEYWORDS = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double",
               "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
               "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
               "switch", "typedef", "union", "unsigned", "void", "volatile", "while"}
MAX_NAME = 63

# Stems of the files a generated project or run directory holds besides NAME.*, compared
# without case (a case-insensitive file system makes `MAIN.c` and `main.c` one file).
RESERVED_STEMS = {
    "main": "the firmware project's harness is main.c",
    "host_main": "`eerie-c run` writes its harness as host_main.c",
    "makefile": "the firmware project's Makefile would be rebuilt from NAME.c by make",
    "gnumakefile": "make would read NAME's files as its makefile",
}


def _reserved(name: str, ld_stem: str | None) -> str | None:
    """Why `name` cannot be a model name in a project, or None."""
    low = name.lower()
    if low in RESERVED_STEMS:
        return RESERVED_STEMS[low]
    if low == "eerie" or low.startswith("eerie_"):
        return "eerie_* names belong to eerie-c's runtime (runtime/eerie_rt.c, eerie_rt.h, EERIE_ macros)"
    if ld_stem and low == ld_stem.lower():
        return f"the board's linker script is {ld_stem}.ld"
    return None


def check_name(name: str, ld_stem: str | None = None) -> str:
    """An explicit --name: a C identifier that is none of the project's reserved stems."""
    if not _IDENT.fullmatch(name) or name in _C_KEYWORDS:
        raise EerieError(f"--name {name!r} is not a valid C identifier")
    # Identifiers starting with "__" or "_" + capital (_Bool, _Complex, ...) are reserved
    # for the implementation; eerie-c's own EERIE_ prefix is reserved for its macros.
    if name.startswith("__") or re.match(r"_[A-Z]", name) or name.upper().startswith("EERIE_"):
        raise EerieError(f"--name {name!r} is not a valid C identifier (reserved)")
    if len(name) > MAX_NAME:
        raise EerieError(f"--name {name[:20]!r}... is not a valid C identifier (longer than "
                         f"{MAX_NAME} characters)")
    why = _reserved(name, ld_stem)
    if why:
        raise EerieError(f"--name {name!r} is reserved: {why}; choose another --name")
    return name


def default_name(path, ld_stem: str | None = None) -> str:
    """The name taken from a model's file name: lower-case identifier characters, never a
    reserved stem (a suffix or prefix `model` is added), always accepted by check_name."""
    s = re.sub(r"[^0-9a-zA-Z_]+", "_", Path(path).stem).strip("_").lower() or "model"
    return pick_name(s, ld_stem)


def pick_name(stem: str, ld_stem: str | None = None) -> str:
    """`stem` made a valid, unreserved name: the first of stem, stem_model, model_stem that
    check_name accepts (a leading digit gets an m_ prefix, long stems are cut)."""
    s = re.sub(r"_+", "_", stem).strip("_") or "model"
    if s[0].isdigit():
        s = "m_" + s
    s = s[:MAX_NAME - len("model_")].rstrip("_")
    for cand in (s, s + "_model", "model_" + s):
        try:
            return check_name(cand, ld_stem)
        except EerieError:
            continue
    raise CompilerBug(f"no valid default name for {stem!r}")   # "model_..." always passes


def board_ld_stem(board) -> str | None:
    """The stem of the linker script of `board` (a Board, a board name or .json path)."""
    if board is None:
        return None
    from .toolchain.boards import Board, get_board
    brd = board if isinstance(board, Board) else get_board(board)
    return brd.linker_script.stem


def model_name(path, name: str | None, board=None) -> str:
    """The checked name of a compile: --name as given, else the default from the file name."""
    ld = board_ld_stem(board)
    return check_name(name, ld) if name else default_name(path, ld)


# ---------------------------------------------------------------------------------------------
# Generated file names must never collide: a later file would silently replace an earlier one.

def merge_files(files: dict, extra: dict, what: str) -> dict:
    """files updated with extra; CompilerBug if a name of extra is already there (without
    case). The name checks above make that impossible for user-chosen names: this is the
    assertion that they stay complete as the project grows files."""
    have = {k.lower(): k for k in files}
    for k in extra:
        if k.lower() in have:
            raise CompilerBug(f"{what}: generated file {k} would overwrite {have[k.lower()]}")
    files.update(extra)
    return files


def check_sources(files: dict) -> None:
    """A firmware project's C sources: `make stack` writes each as stack/<stem>.o, and make
    would rebuild any file of the project that has a <file>.c beside it (GNU make's implicit
    rule), so stems must be unique and no source may be named after another file."""
    stems: dict[str, str] = {}
    plain = {k.lower() for k in files}
    for k in files:
        if not k.endswith(".c"):
            continue
        stem = Path(k).stem.lower()
        if stem in stems:
            raise CompilerBug(f"sources {stems[stem]} and {k} would both compile to stack/{stem}.o")
        stems[stem] = k
        if k[:-2].lower() in plain:
            raise CompilerBug(f"make would rebuild {k[:-2]} from {k}")
