#!/usr/bin/python3
"""The C API as a user of the installed library meets it: `cmake --install` into a scratch
prefix, tests/capi/capi_test.c compiled as C11 with -Wall -Wextra -Werror from nothing but the
installed header and `pkg-config krafla` (static: --static --libs; shared: --libs, when the
build made libkrafla.so), run on an e2e model; every position's logits (one token per eval)
against the numpy reference, with the e2e limits of the model's type. docs/library.md's C
example is compiled the same way and must print a reply; a CMake project of its own builds the
test program through find_package(krafla).

  capi_test.py --build BUILD --work BUILD/e2e --model llama --quant q8_0
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from e2e_common import LIMITS, SRC, mlb, prompt_ids


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r


def pkg_config(prefix: str, *args: str) -> list[str]:
    pcs = glob.glob(os.path.join(prefix, "**", "pkgconfig", "krafla.pc"), recursive=True)
    if len(pcs) != 1:
        sys.exit(f"FAILED: krafla.pc installed {len(pcs)} times under {prefix}")
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0]))
    return run(["pkg-config", *args, "krafla"], env=env).stdout.split()


# A CPU model of qemu-user that lacks a feature of the build's ISA, and that feature's name as
# the guard says it (as e2e.py's guard case).
GUARD_CPU = {
    "avx512vnni": ("Haswell", "avx512f"),
    "avxvnni": ("Haswell", "avxvnni"),
    "avx2": ("Nehalem", "avx"),
    "sse41": ("core2duo", "sse4.1"),
}


def check_cpu_guard(build: str, cmd: list[str]) -> None:
    """The library's own CPU guard: on a CPU without the build's ISA, krafla_model_load fails
    with a message naming the missing feature, and the program goes on (no SIGILL)."""
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        isa = re.search(r"^KRAFLA_ISA:STRING=(\w+)$", f.read(), re.M).group(1)
    qemu = shutil.which("qemu-x86_64")
    if isa not in GUARD_CPU or not qemu:
        print(f"CPU guard: not checked here ({isa}, qemu-x86_64 {'found' if qemu else 'missing'})")
        return
    cpu, feature = GUARD_CPU[isa]
    r = subprocess.run([qemu, "-cpu", cpu, *cmd], capture_output=True, text=True)
    want = f"this CPU lacks {feature}"
    if r.returncode != 1 or f"FAIL: load {cmd[1]}: {want}" not in r.stderr:
        sys.exit(f"FAILED: the C API under -cpu {cpu}: rc {r.returncode}, {r.stderr[-400:]!r}")
    print(f"CPU guard: under -cpu {cpu}, krafla_model_load fails naming {feature}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--build", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--model", default="llama")
    p.add_argument("--quant", default="q8_0")
    p.add_argument("--cc", default=shutil.which("cc") or "cc")
    a = p.parse_args()
    ids = prompt_ids(a.work, a.model)
    model = mlb(a.work, a.model, a.quant)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "prefix")
        run(["cmake", "--install", a.build, "--prefix", prefix])
        headers = sorted(os.listdir(os.path.join(prefix, "include", "krafla")))
        if "krafla.h" not in headers:
            sys.exit(f"FAILED: include/krafla/krafla.h not installed ({headers})")
        leaked = [h for h in headers if not h.endswith(".h")]
        if leaked:
            sys.exit(f"FAILED: non-header files installed in include/krafla: {leaked}")
        src = os.path.join(SRC, "tests", "capi", "capi_test.c")
        flags = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1"]
        links = {"static": pkg_config(prefix, "--static", "--libs")}
        pc = glob.glob(os.path.join(prefix, "**", "krafla.pc"), recursive=True)[0]
        libdir = os.path.dirname(os.path.dirname(pc))
        if glob.glob(os.path.join(libdir, "libkrafla.so*")):
            links["shared"] = pkg_config(prefix, "--libs")
        for kind, libs in links.items():
            exe = os.path.join(tmp, f"capi_test_{kind}")
            cflags = pkg_config(prefix, "--cflags")
            if kind == "static":  # only libkrafla.a may serve, when the .so is installed too
                libs = ["-l:libkrafla.a" if x == "-lkrafla" else x for x in libs]
            run([a.cc, *flags, *cflags, src, "-o", exe, *libs, "-lm"])
            env = dict(os.environ, LD_LIBRARY_PATH=libdir)
            needed = run(["ldd", exe], env=env).stdout
            if (kind == "shared") != ("libkrafla.so" in needed):
                sys.exit(f"FAILED: the {kind} test program's libraries:\n{needed}")
            out = os.path.join(tmp, f"logits-{kind}.f32")
            if kind == "static":
                check_cpu_guard(a.build, [exe, model, ",".join(map(str, ids)), out])
            r = run([exe, model, ",".join(map(str, ids)), out], env=env)
            print(f"{kind}: {r.stdout.strip()}")
            got = np.fromfile(out, dtype=np.float32).reshape(len(ids), -1)
            got_npy = os.path.join(tmp, f"logits-{kind}.npy")
            np.save(got_npy, got)
            ref = os.path.join(a.work, f"{a.model}-ref.npy")
            cmp = [sys.executable, os.path.join(SRC, "tests", "e2e", "compare.py"), ref, got_npy]
            print(run(cmp + LIMITS[a.quant]).stdout.strip())
        # a CMake project of its own: find_package(krafla) on the installed package
        proj = os.path.join(tmp, "cmake-consumer")
        os.makedirs(proj)
        shutil.copy(src, proj)
        with open(os.path.join(proj, "CMakeLists.txt"), "w") as f:
            f.write(
                "cmake_minimum_required(VERSION 3.25)\nproject(consumer C CXX)\n"
                "find_package(krafla 0.1 REQUIRED)\n"
                "add_executable(capi_test capi_test.c)\n"
                "target_compile_options(capi_test PRIVATE -Wall -Wextra -Werror)\n"
                "target_link_libraries(capi_test PRIVATE krafla::krafla m)\n"
            )
        cbuild = os.path.join(tmp, "cmake-consumer-build")
        run(["cmake", "-S", proj, "-B", cbuild, f"-DCMAKE_PREFIX_PATH={prefix}", "-G", "Ninja"])
        run(["cmake", "--build", cbuild])
        out = os.path.join(tmp, "logits-cmake.f32")
        r = run([os.path.join(cbuild, "capi_test"), model, ",".join(map(str, ids)), out])
        print(f"find_package(krafla): {r.stdout.strip()}")
        # docs/library.md's example, as a reader would copy it
        example = os.path.join(tmp, "example.c")
        with open(os.path.join(SRC, "docs", "library.md")) as f:
            doc = f.read()
        with open(example, "w") as f:
            f.write(doc.split("```c\n", 1)[1].split("```", 1)[0])
        exe = os.path.join(tmp, "example")
        libs = ["-l:libkrafla.a" if x == "-lkrafla" else x for x in links["static"]]
        run([a.cc, *flags, *pkg_config(prefix, "--cflags"), example, "-o", exe, *libs])
        chat = mlb(a.work, "qwen3", a.quant)  # a ChatML vocabulary: --chat auto works
        r = run([exe, chat])
        if not r.stdout.strip():
            sys.exit(f"FAILED: docs/library.md's example printed nothing for {chat}")
        print(f"docs/library.md example: {len(r.stdout)} bytes of reply")


if __name__ == "__main__":
    main()
