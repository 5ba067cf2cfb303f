#!/usr/bin/env python3
"""Writes the hostile safetensors corpus and its MANIFEST.

Each file breaks one rule of the reader; MANIFEST lines are
    file <TAB> PTWM_ERR_CODE <TAB> message substring
and tests/test_hostile_safetensors.c asserts exactly that code and text for
every file (opened from memory, mapped, and with pread). The committed files
are what the test reads; rerun this script only to change the corpus:
    python3 tests/hostile/safetensors/make_hostile.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
entries = []


def raw(name, data, code, substr):
    with open(os.path.join(HERE, name + ".safetensors"), "wb") as f:
        f.write(data)
    entries.append((name + ".safetensors", code, substr))


def st(name, header, data, code, substr, hlen=None):
    """header: str (raw JSON text) or bytes; data: bytes after the header."""
    h = header.encode() if isinstance(header, str) else header
    n = len(h) if hlen is None else hlen
    raw(name, struct.pack("<Q", n) + h + data, code, substr)


def t(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def js(obj):
    return json.dumps(obj, separators=(",", ":"))


ok = js({"w": t("F32", [2], 0, 8)})
data8 = bytes(range(8))

# --- file and header length ---------------------------------------------
raw("empty-file", b"", "PTWM_ERR_TRUNCATED", "is 0 bytes, too short for the 8-byte header length")
raw("short-file", b"\x10\x00\x00\x00\x00", "PTWM_ERR_TRUNCATED", "is 5 bytes, too short")
st("header-len-over-cap", ok, data8, "PTWM_ERR_HEADER_SIZE",
   "header length 100000001 is over the cap of 100000000 bytes", hlen=100000001)
st("header-len-plus-8-wraps", ok, data8, "PTWM_ERR_HEADER_SIZE",
   "header length 18446744073709551608 is over the cap", hlen=2**64 - 8)
st("header-len-max", ok, data8, "PTWM_ERR_HEADER_SIZE",
   "header length 18446744073709551615 is over the cap", hlen=2**64 - 1)
st("header-len-past-eof", ok, data8, "PTWM_ERR_HEADER_SIZE",
   "header length 4096 runs past the end of the file (8 + 4096 > ", hlen=4096)
st("header-len-zero", "", b"", "PTWM_ERR_JSON", "header is not valid JSON")

# --- JSON syntax, encoding, padding -----------------------------------------
st("not-json", "hello world!", b"", "PTWM_ERR_JSON", "header is not valid JSON at byte")
st("trailing-garbage", ok + " xyz", data8, "PTWM_ERR_JSON", "end of file expected")
st("nul-padding", ok + "\0\0\0\0", data8, "PTWM_ERR_JSON", "header is not valid JSON")
st("nul-in-string", b'{"w\x00":' + js(t("F32", [2], 0, 8)).encode() + b"}", data8,
   "PTWM_ERR_JSON", "control character")
st("escaped-nul-in-name", '{"w\\u0000x":' + js(t("F32", [2], 0, 8)) + "}", data8,
   "PTWM_ERR_JSON", "header is not valid JSON")
st("invalid-utf8", b'{"w\xff":' + js(t("F32", [2], 0, 8)).encode() + b"}", data8,
   "PTWM_ERR_JSON", "header is not valid UTF-8")
st("overlong-utf8", b'{"w\xc0\xaf":' + js(t("F32", [2], 0, 8)).encode() + b"}", data8,
   "PTWM_ERR_JSON", "header is not valid UTF-8")
st("lone-surrogate", '{"w\\ud800":' + js(t("F32", [2], 0, 8)) + "}", data8,
   "PTWM_ERR_JSON", "header is not valid JSON")
st("utf8-bom", b"\xef\xbb\xbf" + ok.encode(), data8, "PTWM_ERR_JSON", "header is not valid")
# jansson skips a raw NUL right after a number; the reader must not.
st("nul-after-number", b'{"w":{"dtype":"F32","shape":[2\x00],"data_offsets":[0,8]}}', data8,
   "PTWM_ERR_JSON", "header is not valid JSON")
st("missing-comma", '{"a":' + js(t("F32", [1], 0, 4)) + ' "b":' + js(t("F32", [1], 4, 8)) + "}",
   data8, "PTWM_ERR_JSON", "header is not valid JSON at byte")
st("trailing-comma", '{"w":' + js(t("F32", [2], 0, 8)) + ",}", data8, "PTWM_ERR_JSON",
   "header is not valid JSON")
st("deeply-nested", "[" * 100000, b"", "PTWM_ERR_LIMIT", "header nests deeper than 2048 levels")
st("deeply-nested-in-tensor", '{"w":{"dtype":' + "[" * 3000 + "]" * 3000 + "}}", b"",
   "PTWM_ERR_LIMIT", "nests deeper than")
st("duplicate-tensor", '{"w":' + js(t("F32", [1], 0, 4)) + ',"w":' + js(t("F32", [1], 4, 8)) + "}",
   data8, "PTWM_ERR_DUPLICATE", "header has a duplicate key")
st("duplicate-field", '{"w":{"dtype":"F32","dtype":"U8","shape":[2],"data_offsets":[0,8]}}',
   data8, "PTWM_ERR_DUPLICATE", "duplicate")

# --- schema ----------------------------------------------------------------
st("header-is-array", "[]", b"", "PTWM_ERR_SCHEMA", "header must be a JSON object, got an array")
st("tensor-not-object", '{"w":3}', b"", "PTWM_ERR_SCHEMA", "tensor 'w' must be an object, got 3")
st("unknown-key", '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"offset":0}}', data8,
   "PTWM_ERR_SCHEMA", "tensor 'w' has unknown key 'offset'")
st("missing-dtype", '{"w":{"shape":[2],"data_offsets":[0,8]}}', data8, "PTWM_ERR_SCHEMA",
   "tensor 'w' lacks 'dtype'")
st("missing-offsets", '{"w":{"dtype":"F32","shape":[2]}}', data8, "PTWM_ERR_SCHEMA",
   "tensor 'w' lacks 'data_offsets'")
st("dtype-not-string", js({"w": t(5, [2], 0, 8)}), data8, "PTWM_ERR_SCHEMA",
   "tensor 'w': dtype must be a string, got 5")
st("shape-not-array", js({"w": t("F32", 2, 0, 8)}), data8, "PTWM_ERR_SCHEMA",
   "tensor 'w': shape must be an array, got 2")
st("shape-nested", js({"w": t("F32", [[2]], 0, 8)}), data8, "PTWM_ERR_SCHEMA",
   "tensor 'w': shape[0] must be a non-negative integer, got an array")
st("shape-negative", js({"w": t("F32", [-2], 0, 8)}), data8, "PTWM_ERR_SCHEMA",
   "tensor 'w': shape[0] must be a non-negative integer, got -2")
st("shape-fraction", '{"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}}', data8,
   "PTWM_ERR_SCHEMA", "tensor 'w': shape[0] must be a non-negative integer, got 1.5")
st("shape-exponent", '{"w":{"dtype":"U8","shape":[1e3],"data_offsets":[0,1000]}}',
   bytes(1000), "PTWM_ERR_SCHEMA", "tensor 'w': shape[0] must be a non-negative integer, got 1000")
st("shape-30-digits",
   '{"w":{"dtype":"U8","shape":[123456789012345678901234567890],"data_offsets":[0,8]}}', data8,
   "PTWM_ERR_SCHEMA", "tensor 'w': shape[0] = 1.23457e+29 is out of range")
st("offset-30-digits",
   '{"w":{"dtype":"U8","shape":[8],"data_offsets":[0,100000000000000000000000000000]}}', data8,
   "PTWM_ERR_SCHEMA", "tensor 'w': data_offsets[1] = 1e+29 is out of range")
st("offset-2-pow-63",
   '{"w":{"dtype":"U8","shape":[8],"data_offsets":[9223372036854775808,9223372036854775816]}}',
   data8, "PTWM_ERR_SCHEMA", "tensor 'w': data_offsets[0] = 9.22337e+18 is out of range")
st("number-400-digits", '{"w":{"dtype":"U8","shape":[' + "9" * 400 + '],"data_offsets":[0,8]}}',
   data8, "PTWM_ERR_SCHEMA", "header has a number out of range")
st("offset-negative", js({"w": t("U8", [4], -4, 0)}), data8, "PTWM_ERR_SCHEMA",
   "tensor 'w': data_offsets[0] must be a non-negative integer, got -4")
st("metadata-as-tensor", js({"__metadata__": t("F32", [2], 0, 8)}), data8, "PTWM_ERR_SCHEMA",
   "a tensor may not be named '__metadata__'")
st("metadata-non-string", js({"__metadata__": {"epoch": 3}, "w": t("F32", [2], 0, 8)}), data8,
   "PTWM_ERR_SCHEMA", "__metadata__ key 'epoch': value must be a string, got 3")
st("metadata-not-object", js({"__metadata__": "pt", "w": t("F32", [2], 0, 8)}), data8,
   "PTWM_ERR_SCHEMA", "__metadata__ must be an object of strings, got a string")
st("name-too-long", js({"n" * 4097: t("F32", [2], 0, 8)}), data8, "PTWM_ERR_LIMIT",
   "tensor name of 4097 bytes is longer than 4096")
st("too-many-dims", js({"w": t("U8", [1] * 17, 0, 1)}), data8[:1], "PTWM_ERR_LIMIT",
   "tensor 'w': shape has 17 dimensions, at most 16 accepted")

# --- dtypes and shapes --------------------------------------------------------
st("unknown-dtype", js({"w": t("F128", [2], 0, 32)}), bytes(32), "PTWM_ERR_DTYPE",
   "tensor 'w': unknown dtype 'F128'")
st("dtype-lowercase", js({"w": t("f32", [2], 0, 8)}), data8, "PTWM_ERR_DTYPE",
   "tensor 'w': unknown dtype 'f32'")
st("shape-wraps-to-zero", js({"w": t("U8", [2**32, 2**32], 0, 0)}), b"", "PTWM_ERR_SHAPE",
   "tensor 'w': shape [4294967296, 4294967296] of U8 overflows 64 bits")
st("shape-bits-overflow", js({"w": t("F64", [2**61], 0, 0)}), b"", "PTWM_ERR_SHAPE",
   "shape [2305843009213693952] of F64 overflows 64 bits")
st("shape-overflow-with-zero-dim", js({"w": t("U8", [2**40, 0, 2**40], 0, 0)}), b"",
   "PTWM_ERR_SHAPE", "overflows 64 bits")
st("f4-odd-count", js({"w": t("F4", [3], 0, 2)}), b"\0\0", "PTWM_ERR_SHAPE",
   "tensor 'w': shape [3] of F4 is 12 bits, not a whole number of bytes")
st("f6-not-whole-bytes", js({"w": t("F6_E2M3", [3], 0, 3)}), b"\0\0\0", "PTWM_ERR_SHAPE",
   "shape [3] of F6_E2M3 is 18 bits, not a whole number of bytes")

# --- data_offsets --------------------------------------------------------------
st("offsets-one-element", '{"w":{"dtype":"F32","shape":[2],"data_offsets":[8]}}', data8,
   "PTWM_ERR_OFFSETS", "tensor 'w': data_offsets must be [begin, end], got 1 element(s)")
st("offsets-three-elements", '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}', data8,
   "PTWM_ERR_OFFSETS", "got 3 element(s)")
st("offsets-not-array", '{"w":{"dtype":"F32","shape":[2],"data_offsets":"0-8"}}', data8,
   "PTWM_ERR_OFFSETS", "data_offsets must be [begin, end], got a string")
st("offsets-inverted", js({"w": t("U8", [4], 8, 4)}), data8, "PTWM_ERR_OFFSETS",
   "tensor 'w': data_offsets [8, 4] end before they begin")
st("offsets-size-mismatch", js({"w": t("F32", [3, 5], 0, 100)}), bytes(100), "PTWM_ERR_OFFSETS",
   "tensor 'w': data_offsets [0, 100] hold 100 bytes, shape [3, 5] of F32 needs 60")
st("scalar-wrong-size", js({"s": t("F32", [], 0, 8)}), data8, "PTWM_ERR_OFFSETS",
   "tensor 's': data_offsets [0, 8] hold 8 bytes, shape [] of F32 needs 4")

# --- layout: tiling and file size ------------------------------------------------
h = js({"a": t("U8", [4], 0, 4), "b": t("U8", [4], 8, 12)})
st("hole", h, bytes(12), "PTWM_ERR_LAYOUT",
   "hole in the data region: bytes [4, 8) between tensor 'a' [0, 4] and tensor 'b' [8, 12]")
st("hole-at-start", js({"a": t("U8", [4], 4, 8)}), data8, "PTWM_ERR_LAYOUT",
   "bytes [0, 4) before tensor 'a' [4, 8] belong to no tensor")
st("overlap", js({"a": t("U8", [8], 0, 8), "b": t("U8", [8], 4, 12)}), bytes(12),
   "PTWM_ERR_LAYOUT", "tensor 'b' [4, 12] overlaps tensor 'a' [0, 8]")
st("ten-on-one-range", js({"t%d" % i: t("F32", [1], 0, 4) for i in range(10)}), bytes(4),
   "PTWM_ERR_LAYOUT", "tensors 't0' and 't1' both occupy data_offsets [0, 4]")
st("zero-size-inside", js({"a": t("U8", [8], 0, 8), "z": t("U8", [0], 4, 4)}), data8,
   "PTWM_ERR_LAYOUT", "tensor 'z' [4, 4] overlaps tensor 'a' [0, 8]")
st("zero-size-past-end", js({"a": t("U8", [8], 0, 8), "z": t("U8", [0], 12, 12)}), data8,
   "PTWM_ERR_LAYOUT", "bytes [8, 12) between tensor 'a' [0, 8] and tensor 'z' [12, 12]")
hdr = js({"w": t("U8", [400], 0, 400)})
st("offsets-past-end", hdr, data8, "PTWM_ERR_TRUNCATED",
   "tensor 'w' ends at data offset 400: expected %d bytes, file has %d" %
   (8 + len(hdr) + 400, 8 + len(hdr) + 8))
st("offsets-far-past-end", js({"w": t("U8", [2**60], 0, 2**60)}), data8, "PTWM_ERR_TRUNCATED",
   "ends at data offset 1152921504606846976: expected 1152921504606847")
hdr = js({"w": t("F32", [2], 0, 8)})
st("truncated-data", hdr, data8[:5], "PTWM_ERR_TRUNCATED",
   "expected %d bytes, file has %d (truncated?)" % (8 + len(hdr) + 8, 8 + len(hdr) + 5))
st("trailing-bytes", hdr, data8 + b"junk", "PTWM_ERR_LAYOUT",
   "expected %d bytes, file has %d (4 bytes after the last tensor)" %
   (8 + len(hdr) + 8, 8 + len(hdr) + 12))
st("no-tensors-trailing-bytes", "{}", b"\0", "PTWM_ERR_LAYOUT",
   "expected 10 bytes, file has 11")

with open(os.path.join(HERE, "MANIFEST"), "w") as f:
    f.write("# file\terror code\tmessage substring (written by make_hostile.py)\n")
    for name, code, substr in entries:
        assert "\t" not in substr and "\n" not in substr
        f.write("%s\t%s\t%s\n" % (name, code, substr))
print("%d hostile files" % len(entries))
