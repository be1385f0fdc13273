"""Compile kernels to CUBIN from the command line, with or without a GPU:

    python -m irforge.runtime model.ir --arch sm_90a           # kernel- or cuda-level IR: every kernel
    python -m irforge.runtime k_add.cu --arch sm_90a -o out/    # a CUDA file (the prelude header is available)

Prints each kernel's CUBIN size and the resources its CUBIN records (registers, static shared memory, stack
frame); `-o` writes the CUBINs (and, for IR input, the emitted .cu sources). Errors are located messages and exit
status 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv=None, stdout=None, stderr=None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    ap = argparse.ArgumentParser(prog="python -m irforge.runtime", description=__doc__.split("\n\n")[0])
    ap.add_argument("input", help="a .ir file (kernel or cuda level) or a .cu file")
    ap.add_argument("--arch", default=None, help="target, e.g. sm_90a (default: this GPU's, or sm_90a without one)")
    ap.add_argument("-o", dest="out", default=None, help="folder for the CUBINs (and emitted sources)")
    args = ap.parse_args(argv)
    from irforge.diagnostics import IRForgeError

    try:
        return _run(args, stdout)
    except IRForgeError as e:
        stderr.write(e.render() + "\n")
        return 1
    except OSError as e:
        stderr.write(f"error: {e.strerror}: {e.filename}\n")
        return 1


def _run(args, stdout) -> int:
    from .cubin import resource_usage
    from .nvrtc import compile_cuda

    path = Path(args.input)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".cu":
        units = [(path.stem, text)]
    else:
        units = _kernels_of(text, str(path))
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    for name, source in units:
        cubin = compile_cuda(source, name, arch=args.arch)
        report = "; ".join(
            f"{r.registers} registers, {r.smem} bytes of static shared memory, {r.stack_frame} bytes of stack frame"
            for r in resource_usage(cubin.image).values()
        )
        stdout.write(f"{name}: {len(cubin.image)} bytes of CUBIN for {cubin.arch}; {report}\n")
        if out is not None:
            (out / f"{name}.cubin").write_bytes(cubin.image)
            if path.suffix != ".cu":
                (out / f"{name}.cu").write_text(source)
    return 0


def _kernels_of(text: str, file: str) -> list[tuple[str, str]]:
    """The cuda.kernel sources of a module, lowering it from the kernel level first if it is there."""
    from irforge.dialects.cuda.ops import CudaKernelOp
    from irforge.parser import parse_module
    from irforge.pass_manager import run_pipeline
    from irforge.pipeline import module_level

    module = parse_module(text, file)
    if module_level(module) == "kernel":
        run_pipeline(module, "kernel-to-cuda")
    return [
        (op.attributes["sym_name"], op.attributes["source"]) for op in module.body.ops if isinstance(op, CudaKernelOp)
    ]


if __name__ == "__main__":
    sys.exit(main())
