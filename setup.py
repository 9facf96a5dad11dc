"""The one compiled part: the Kineto batch decoder (collectors/readers/_kineto_fast.c). Optional:
where it cannot be built (no C compiler), the import reads every file through msgspec and Python,
only slower. Everything else is in pyproject.toml."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("collectors.readers._kineto_fast", ["collectors/readers/_kineto_fast.c"],
                             extra_compile_args=["-O3", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
                             optional=True)])
