"""Pre-initialised guest modules: a snapshot of memory after the runtime starts.

Starting QuickJS (runtime, context, intrinsics, prelude) costs more than the
rest of a small call. So the host starts it once, reads the guest's linear
memory, and writes a new module whose data segments ARE that memory: wasmtime
maps data segments copy-on-write, so every later instance starts initialised
for the price of an instantiation.

This is sound for our guest because its only mutable global is the shadow
stack pointer, which every export restores before returning, and its table is
never written; `snapshot_module` checks the first and refuses anything else.
"""

from __future__ import annotations

from collections.abc import Iterator

_MAGIC = b"\0asm\x01\0\0\0"
_MEMORY_SECTION = 5
_GLOBAL_SECTION = 6
_DATA_SECTION = 11
_DATA_COUNT_SECTION = 12
_PAGE = 65536
# Zero runs shorter than this stay inside a segment: fewer, larger segments.
_MIN_ZERO_GAP = 4096


class SnapshotError(Exception):
    """The module is not of the shape a memory snapshot can stand for."""


def _read_uleb(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, position


def _uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte if done else byte | 0x80)
        if done:
            return bytes(out)


def _sections(wasm: bytes) -> Iterator[tuple[int, bytes]]:
    if not wasm.startswith(_MAGIC):
        raise SnapshotError("not a WebAssembly module")
    position = len(_MAGIC)
    while position < len(wasm):
        section_id = wasm[position]
        size, start = _read_uleb(wasm, position + 1)
        yield section_id, wasm[start : start + size]
        position = start + size


def _mutable_globals(payload: bytes) -> int:
    count, position = _read_uleb(payload, 0)
    mutable = 0
    for _ in range(count):
        mutable += payload[position + 1]
        position += 2
        while payload[position] != 0x0B:  # skip the constant expression to its `end`
            opcode = payload[position]
            position += 1
            if opcode in (0x41, 0x42, 0x23):
                _, position = _read_uleb(payload, position)
            elif opcode == 0x44:
                position += 8
            elif opcode == 0x43:
                position += 4
            else:
                raise SnapshotError("unexpected global initialiser")
        position += 1
    return mutable


def _memory_section(pages: int) -> bytes:
    return _uleb(1) + b"\x00" + _uleb(pages)  # one memory, no maximum


def _data_segments(memory: bytes) -> list[bytes]:
    segments = []
    length = len(memory)
    position = 0
    while position < length:
        while position < length and memory[position] == 0:
            position += 1
        if position >= length:
            break
        end = position
        zeros = 0
        while end < length and zeros < _MIN_ZERO_GAP:
            zeros = zeros + 1 if memory[end] == 0 else 0
            end += 1
        end -= zeros
        chunk = memory[position:end]
        segments.append(b"\x00\x41" + _sleb(position) + b"\x0b" + _uleb(len(chunk)) + chunk)
        position = end
    return segments


def snapshot_module(wasm: bytes, memory: bytes) -> bytes:
    """A copy of `wasm` whose memory starts as `memory` (a whole number of pages).

    Raises `SnapshotError` when the module has more than one mutable global
    or no memory section to replace.
    """
    if len(memory) % _PAGE:
        raise SnapshotError("memory is not a whole number of pages")
    segments = _data_segments(memory)
    data = _uleb(len(segments)) + b"".join(segments)
    out = bytearray(_MAGIC)
    saw_memory = False
    for section_id, payload in _sections(wasm):
        if section_id == _GLOBAL_SECTION and _mutable_globals(payload) > 1:
            raise SnapshotError("the module has mutable globals besides the stack pointer")
        if section_id == _MEMORY_SECTION:
            payload = _memory_section(len(memory) // _PAGE)
            saw_memory = True
        elif section_id == _DATA_COUNT_SECTION:
            payload = _uleb(len(segments))
        elif section_id == _DATA_SECTION:
            payload = data
        out.append(section_id)
        out += _uleb(len(payload)) + payload
    if not saw_memory:
        raise SnapshotError("the module defines no memory")
    return bytes(out)
