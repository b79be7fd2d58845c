"""Reading the ELF files a native build makes: a cubin's kernels and their machine code, an object's symbols.

Pure Python (no cuobjdump: the CPU machines have no such tool). What a kernel's machine code is, for the
comparison of two builds: its ``.text.<name>`` bytes, its relocations (offset, type, addend and the name of the
symbol, with the per-file numbering of nvcc's internal helpers removed), its ``.nv.info.<name>`` attributes
(registers, parameters, barriers) and the sizes of its shared and constant sections. Two builds whose kernels
agree on all of these run the same SASS: ``cuobjdump -sass`` disassembles exactly those bytes.
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass
from pathlib import Path

SHT_SYMTAB = 2
SHT_DYNSYM = 11
SHT_RELA = 4
SHT_REL = 9
STT_FUNC = 2
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
STO_CUDA_ENTRY = 0x10  # st_other of a kernel (an entry point) in a cubin
_INTERNAL = re.compile(r"\$__internal_\d+_\$")


class ElfError(ValueError):
    """Not an ELF file kernelpilot can read (truncated, 32-bit, big-endian)."""


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True)
class Symbol:
    name: str
    bind: int
    type: int
    other: int
    section: int  # index; 0 = undefined

    @property
    def defined(self) -> bool:
        return self.section != 0


class Elf:
    """A 64-bit little-endian ELF file, read whole."""

    def __init__(self, data: bytes) -> None:
        if data[:4] != b"\x7fELF" or len(data) < 64:
            raise ElfError("not an ELF file")
        if data[4] != 2 or data[5] != 1:
            raise ElfError("not a 64-bit little-endian ELF file")
        self.data = data
        shoff = struct.unpack_from("<Q", data, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        raw = []
        for i in range(shnum):
            fields = struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
            raw.append(fields)
        names_at = raw[shstrndx][4] if shnum else 0
        self.sections = [Section(self._string(names_at, f[0]), f[1], f[4], f[5], f[6], f[7], f[9]) for f in raw]
        self.by_name = {s.name: i for i, s in enumerate(self.sections)}
        self.symbols = self._symbols()

    @classmethod
    def read(cls, path: Path) -> "Elf":
        try:
            return cls(Path(path).read_bytes())
        except (OSError, struct.error, IndexError) as exc:
            raise ElfError(f"{path}: {exc}") from exc

    def _string(self, table_offset: int, offset: int) -> str:
        start = table_offset + offset
        end = self.data.index(b"\0", start)
        return self.data[start:end].decode("utf-8", "replace")

    def _symbols(self, kind: int = SHT_SYMTAB) -> list[Symbol]:
        table = next((s for s in self.sections if s.type == kind), None)
        if table is None:
            return []
        strings = self.sections[table.link].offset
        out = []
        for j in range(table.size // 24):
            name, info, other, shndx, _value, _size = struct.unpack_from("<IBBHQQ", self.data, table.offset + j * 24)
            out.append(Symbol(self._string(strings, name), info >> 4, info & 0xF, other, shndx))
        return out

    def dynamic_symbols(self) -> list[Symbol]:
        return self._symbols(SHT_DYNSYM)

    def section_bytes(self, name: str) -> bytes:
        i = self.by_name.get(name)
        if i is None:
            return b""
        s = self.sections[i]
        return self.data[s.offset:s.offset + s.size] if s.type != 8 else b""  # SHT_NOBITS holds no bytes

    def section_size(self, name: str) -> int:
        i = self.by_name.get(name)
        return self.sections[i].size if i is not None else 0

    def relocations(self, target: str) -> list[tuple[int, int, str, int]]:
        """(offset, type, symbol name, addend) of the relocations applied to section ``target``."""
        out: list[tuple[int, int, str, int]] = []
        index = self.by_name.get(target)
        for s in self.sections:
            if s.type not in (SHT_RELA, SHT_REL) or s.info != index:
                continue
            size = 24 if s.type == SHT_RELA else 16
            for k in range(s.size // size):
                if s.type == SHT_RELA:
                    offset, info, addend = struct.unpack_from("<QQq", self.data, s.offset + k * size)
                else:
                    (offset, info), addend = struct.unpack_from("<QQ", self.data, s.offset + k * size), 0
                symbol = self.symbols[info >> 32].name if (info >> 32) < len(self.symbols) else "?"
                out.append((offset, info & 0xFFFFFFFF, _INTERNAL.sub("$__internal_$", symbol), addend))
        return sorted(out)


def kernels(cubin: Path | Elf) -> list[str]:
    """The mangled names of the kernels (entry points) a cubin defines, in symbol order."""
    elf = cubin if isinstance(cubin, Elf) else Elf.read(cubin)
    return [s.name for s in elf.symbols
            if s.type == STT_FUNC and s.defined and s.other & STO_CUDA_ENTRY]


# .nv.info attributes whose value starts with a symbol index (numbered per file): EIATTR_PARAM_CBANK in a kernel's
# own section; frame size, minimum and maximum stack size and register count in the file's .nv.info.
_KERNEL_SYMBOL_ATTRS = {0x0A}
_FUNCTION_ATTRS = {0x11, 0x12, 0x23, 0x2F}


def _attributes(data: bytes) -> list[tuple[int, int, bytes]]:
    """(format, attribute, value) of each entry of a .nv.info section."""
    out, i = [], 0
    while i + 2 <= len(data):
        fmt, attr = data[i], data[i + 1]
        if fmt == 4:  # EIFMT_SVAL: a 16-bit size, then the value
            size = struct.unpack_from("<H", data, i + 2)[0]
            out.append((fmt, attr, data[i + 4:i + 4 + size]))
            i += 4 + size
        elif fmt == 1:  # EIFMT_NVAL: no value
            out.append((fmt, attr, b""))
            i += 2
        else:  # EIFMT_BVAL, EIFMT_HVAL: two bytes
            out.append((fmt, attr, data[i + 2:i + 4]))
            i += 4
    return out


def _symbol_label(elf: Elf, index: int) -> str:
    if not 0 <= index < len(elf.symbols):
        return f"#{index}"
    symbol = elf.symbols[index]
    if symbol.type == 3 and 0 < symbol.section < len(elf.sections):  # STT_SECTION: named by its section
        return "section:" + elf.sections[symbol.section].name
    return _INTERNAL.sub("$__internal_$", symbol.name)


def kernel_code(elf: Elf, name: str) -> str:
    """A digest of everything that makes up kernel ``name``'s machine code in ``elf`` (see the module doc)."""
    digest = hashlib.sha256()
    text = elf.by_name.get(f".text.{name}")
    if text is not None:
        section = elf.sections[text]
        digest.update(f"regs={section.info >> 24}".encode())
    digest.update(elf.section_bytes(f".text.{name}"))
    for fmt, attr, value in _attributes(elf.section_bytes(f".nv.info.{name}")):
        if attr in _KERNEL_SYMBOL_ATTRS and len(value) >= 4:
            value = _symbol_label(elf, struct.unpack_from("<I", value)[0]).encode() + value[4:]
        digest.update(bytes([fmt, attr]) + value)
    index = next((i for i, s in enumerate(elf.symbols) if s.name == name), -1)
    for fmt, attr, value in _attributes(elf.section_bytes(".nv.info")):
        if attr in _FUNCTION_ATTRS and len(value) >= 4 and struct.unpack_from("<I", value)[0] == index:
            digest.update(b"global" + bytes([fmt, attr]) + value[4:])
    for reloc in elf.relocations(f".text.{name}"):
        digest.update(repr(reloc).encode())
    for part in (f".nv.shared.{name}", f".nv.constant0.{name}", f".nv.local.{name}"):
        digest.update(f"{part}={elf.section_size(part)}".encode())
    return digest.hexdigest()


def kernel_codes(paths: list[Path]) -> dict[str, str]:
    """Kernel name -> code digest over several cubins (a kernel found in two must be the same in both)."""
    out: dict[str, str] = {}
    for path in paths:
        elf = Elf.read(path)
        for name in kernels(elf):
            code = kernel_code(elf, name)
            if out.setdefault(name, code) != code:
                out[name] = "conflict"
    return out


def defined_functions(obj: Path) -> list[Symbol]:
    """The functions a host object file defines (the host half of an nvcc compile, or any .o)."""
    return [s for s in Elf.read(obj).symbols if s.type == STT_FUNC and s.defined]


def undefined_dynamic(library: Path) -> list[str]:
    """The symbols a shared library needs from elsewhere (its dynamic symbol table's undefined entries)."""
    return sorted({s.name for s in Elf.read(library).dynamic_symbols() if not s.defined and s.name})


def embedded_cubins(obj: Path) -> list[Elf]:
    """The cubins nvcc embedded in a host object's ``.nv_fatbin`` (uncompressed ones: nvcc's default)."""
    data = Elf.read(obj).section_bytes(".nv_fatbin")
    out, at = [], data.find(b"\x7fELF")
    while at >= 0:
        try:
            out.append(Elf(data[at:]))
        except (ElfError, struct.error, IndexError, ValueError):
            pass
        at = data.find(b"\x7fELF", at + 4)
    return out
