"""The GPU runtime: NVRTC compilation to CUBIN (with a disk cache), module load, pre-packed launches, torch tensors as
buffers, and an executor for whole cuda-level programs (optionally replayed as a CUDA graph).

    from irforge.runtime import has_gpu, compile_cuda, Executor

`has_gpu()` is the one check every GPU test skips through. Nothing here touches CUDA until it is called.
"""

_LAZY = {
    "has_gpu": ("irforge.runtime.driver", "has_gpu"),
    "CudaError": ("irforge.runtime.driver", "CudaError"),
    "Module": ("irforge.runtime.driver", "Module"),
    "Function": ("irforge.runtime.driver", "Function"),
    "PackedArgs": ("irforge.runtime.driver", "PackedArgs"),
    "TensorMap": ("irforge.runtime.driver", "TensorMap"),
    "compile_cuda": ("irforge.runtime.nvrtc", "compile_cuda"),
    "CompileError": ("irforge.runtime.nvrtc", "CompileError"),
    "Cubin": ("irforge.runtime.nvrtc", "Cubin"),
    "default_arch": ("irforge.runtime.nvrtc", "default_arch"),
    "Executor": ("irforge.runtime.executor", "Executor"),
    "run_program": ("irforge.runtime.executor", "run_program"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'irforge.runtime' has no attribute {name!r}")


__all__ = list(_LAZY)
