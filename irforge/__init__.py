"""irforge: a hackable ML compiler that lowers PyTorch programs to CUDA through six textual IR levels.

The public API is small and loads lazily (nothing here imports torch):

    parse_module(text, file)                       text -> IR module
    print_module(module)                           IR module -> text
    run_pipeline(module, "a,b{x=1}", ...)          run a pipeline on a module, in place
    Pass, option, Choices, IntRange, Pow2          a pass and its options' domains (docs/writing-a-pass.md)
    compile(model, *example_inputs, ir="tensor")   PyTorch -> a Program: IR at a level, params, interpreter
    interpret(module, inputs, params)              run IR with its level's reference interpreter
"""

__version__ = "0.1.0"

_LAZY = {
    "parse_module": ("irforge.parser", "parse_module"),
    "print_module": ("irforge.printer", "print_module"),
    "verify": ("irforge.verifier", "verify"),
    "IRForgeError": ("irforge.diagnostics", "IRForgeError"),
    "run_pipeline": ("irforge.pass_manager", "run_pipeline"),
    "Pass": ("irforge.pass_manager", "Pass"),
    "option": ("irforge.pass_manager", "option"),
    "Choices": ("irforge.pass_manager", "Choices"),
    "IntRange": ("irforge.pass_manager", "IntRange"),
    "Pow2": ("irforge.pass_manager", "Pow2"),
    "compile": ("irforge.compiler", "compile"),
    "Program": ("irforge.compiler", "Program"),
    "interpret": ("irforge.interpreter", "interpret"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'irforge' has no attribute {name!r}")


__all__ = list(_LAZY)
