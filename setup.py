"""The compiled parts: the Kineto batch decoder (collectors/readers/_kineto_fast.c) and the interval
nesting pass (collectors/readers/_nesting_fast.c). Optional: where they cannot be built (no C
compiler), the import reads every file through msgspec and Python and nests with NumPy, only
slower. Everything else is in pyproject.toml."""
from setuptools import Extension, setup

FLAGS = ["-O3", "-Wall", "-Wextra", "-Wno-missing-field-initializers"]
setup(ext_modules=[Extension("collectors.readers._kineto_fast", ["collectors/readers/_kineto_fast.c"],
                             extra_compile_args=FLAGS, optional=True),
                   Extension("collectors.readers._nesting_fast", ["collectors/readers/_nesting_fast.c"],
                             extra_compile_args=FLAGS, optional=True)])
